package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// detectEnv makes `azkafka detect` read env only: the real environment is
// not consulted, every metadata endpoint points at a refused loopback port,
// and providers default to "env", so nothing can leave loopback.
func detectEnv(t *testing.T, env map[string]string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	full := map[string]string{
		"AZKAFKA_DETECT_PROVIDERS":          "env",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://" + refused,
		"GCE_METADATA_HOST":                 refused,
		"AZKAFKA_AZURE_IMDS_ENDPOINT":       "http://" + refused,
	}
	for k, v := range env {
		full[k] = v
	}
	old := detectGetenv
	detectGetenv = func(k string) string { return full[k] }
	t.Cleanup(func() { detectGetenv = old })
}

// fakeIMDS serves IMDSv2: a token from PUT /latest/api/token, required on
// GETs of the zone name (az) and the zone ID (id).
func fakeIMDS(t *testing.T, az, id string) (*httptest.Server, *atomic.Int64) {
	var rounds atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" &&
			r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") != "":
			// The SDK reads the granted TTL from this response header.
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
			fmt.Fprint(w, "tok")
		case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data/placement/availability-zone" &&
			r.Header.Get("X-aws-ec2-metadata-token") == "tok":
			rounds.Add(1)
			fmt.Fprint(w, az)
		case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data/placement/availability-zone-id" &&
			r.Header.Get("X-aws-ec2-metadata-token") == "tok":
			rounds.Add(1)
			fmt.Fprint(w, id)
		default:
			http.Error(w, "no", http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &rounds
}

func TestDetectCommand(t *testing.T) {
	imds, rounds := fakeIMDS(t, "eu-central-1b", "euc1-az3")
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantStatus int
		wantOut    []string // substrings of stdout
		wantErr    string   // substring of stderr
	}{
		{name: "env", env: map[string]string{"AZKAFKA_AZ": "us-east-1a"},
			wantStatus: exitOK, wantOut: []string{"az:", "us-east-1a", "source:", "env"}},
		{name: "warpstream variable", env: map[string]string{"WARPSTREAM_AVAILABILITY_ZONE": "us-east-1c"},
			wantStatus: exitOK, wantOut: []string{"us-east-1c"}},
		{name: "ec2 fake", env: map[string]string{"AZKAFKA_DETECT_PROVIDERS": "env,ec2", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL},
			wantStatus: exitOK, wantOut: []string{"eu-central-1b", "ec2", "PROVIDER", "not configured"}},
		{name: "none found", env: map[string]string{"AZKAFKA_DETECT_PROVIDERS": "env,ec2,gcp,azure"},
			wantStatus: exitFail, wantOut: []string{"(none)", "not this cloud"}, wantErr: "no availability zone found"},
		{name: "invalid env zone", env: map[string]string{"AZKAFKA_AZ": "us-east-1a,warpstream_interzone_lb=false"},
			wantStatus: exitUsage, wantErr: `AZKAFKA_AZ="us-east-1a,warpstream_interzone_lb=false": invalid AZ`},
		{name: "bad timeout", env: map[string]string{"AZKAFKA_DETECT_TIMEOUT": "abc"},
			wantStatus: exitUsage, wantErr: `AZKAFKA_DETECT_TIMEOUT="abc": not a Go duration`},
		{name: "unknown provider", env: map[string]string{"AZKAFKA_DETECT_PROVIDERS": "env,aws"},
			wantStatus: exitUsage, wantErr: `unknown provider "aws"`},
		{name: "bad flag", args: []string{"--yaml"}, wantStatus: exitUsage, wantErr: "flag provided but not defined: -yaml"},
		{name: "extra argument", args: []string{"now"}, wantStatus: exitUsage, wantErr: `unexpected argument "now"`},
		{name: "help", args: []string{"-h"}, wantStatus: exitOK, wantOut: []string{"Usage: azkafka detect [--json]", "AZKAFKA_DETECT_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			detectEnv(t, tt.env)
			var out, errOut bytes.Buffer
			got := run(append([]string{"detect"}, tt.args...), strings.NewReader(""), &out, &errOut)
			if got != tt.wantStatus {
				t.Errorf("status = %d, want %d (stdout %q, stderr %q)", got, tt.wantStatus, out.String(), errOut.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout = %q, want it to contain %q", out.String(), w)
				}
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tt.wantErr)
			}
		})
	}
	if n := rounds.Load(); n != 1 {
		t.Errorf("fake IMDS answered %d GETs, want 1", n)
	}
}

func TestDetectCommandJSON(t *testing.T) {
	imds, _ := fakeIMDS(t, "ap-northeast-1d", "apne1-az2")
	tests := []struct {
		name       string
		env        map[string]string
		wantStatus int
		wantAZ     string
		wantSource string
		wantNames  []string
		wantErrIn  map[string]string // provider -> substring of its error
	}{
		{name: "env", env: map[string]string{"AZKAFKA_AZ": "us-west-2b"},
			wantStatus: exitOK, wantAZ: "us-west-2b", wantSource: "env", wantNames: []string{"env"}},
		{name: "ec2", env: map[string]string{"AZKAFKA_DETECT_PROVIDERS": "env,ec2,azure", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL},
			wantStatus: exitOK, wantAZ: "ap-northeast-1d", wantSource: "ec2", wantNames: []string{"env", "ec2", "azure"},
			wantErrIn: map[string]string{"env": "not configured"}},
		{name: "none", env: map[string]string{"AZKAFKA_DETECT_PROVIDERS": "ecs,ec2,kubernetes"},
			wantStatus: exitFail, wantNames: []string{"ecs", "ec2", "kubernetes"},
			wantErrIn: map[string]string{"ecs": "ECS_CONTAINER_METADATA_URI_V4 unset", "ec2": "connection refused", "kubernetes": "NODE_NAME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			detectEnv(t, tt.env)
			var out, errOut bytes.Buffer
			got := run([]string{"detect", "--json"}, strings.NewReader(""), &out, &errOut)
			if got != tt.wantStatus {
				t.Fatalf("status = %d, want %d (stderr %q)", got, tt.wantStatus, errOut.String())
			}
			// Decode strictly into the documented keys.
			var doc struct {
				AZ        *string  `json:"az"`
				Source    *string  `json:"source"`
				ElapsedMS *float64 `json:"elapsed_ms"`
				Providers []struct {
					Name      *string  `json:"name"`
					AZ        *string  `json:"az"`
					Error     *string  `json:"error"`
					ElapsedMS *float64 `json:"elapsed_ms"`
				} `json:"providers"`
			}
			dec := json.NewDecoder(&out)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("stdout is not the documented JSON: %v", err)
			}
			if doc.AZ == nil || doc.Source == nil || doc.ElapsedMS == nil || doc.Providers == nil {
				t.Fatalf("missing keys in %+v", doc)
			}
			if *doc.AZ != tt.wantAZ || *doc.Source != tt.wantSource || *doc.ElapsedMS < 0 {
				t.Errorf("az %q source %q elapsed %v; want %q %q", *doc.AZ, *doc.Source, *doc.ElapsedMS, tt.wantAZ, tt.wantSource)
			}
			if len(doc.Providers) != len(tt.wantNames) {
				t.Fatalf("providers %+v, want %v", doc.Providers, tt.wantNames)
			}
			for i, p := range doc.Providers {
				if p.Name == nil || p.AZ == nil || p.Error == nil || p.ElapsedMS == nil {
					t.Fatalf("provider %d lacks keys", i)
				}
				if *p.Name != tt.wantNames[i] {
					t.Errorf("provider %d = %q, want %q", i, *p.Name, tt.wantNames[i])
				}
				if want, ok := tt.wantErrIn[*p.Name]; ok && !strings.Contains(*p.Error, want) {
					t.Errorf("%s error = %q, want it to contain %q", *p.Name, *p.Error, want)
				}
				if *p.Name == tt.wantSource && (*p.AZ != tt.wantAZ || *p.Error != "") {
					t.Errorf("winner %s: az %q error %q", *p.Name, *p.AZ, *p.Error)
				}
			}
		})
	}
}

// hangListener accepts connections and never answers, until the test ends.
func hangListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// ECS, GCP and Azure accept and never answer, EC2 answers at once: the
// command answers EC2's zone when the 1 s budget ends, in both formats, and
// shows the sources that were cut.
func TestDetectCommandAnswersAtBudget(t *testing.T) {
	const budgetMS = 1000.0
	hang := hangListener(t)
	imds, _ := fakeIMDS(t, "us-east-1a", "use1-az6")
	for _, tt := range []struct {
		format, want string
	}{{"", "us-east-1a"}, {"id", "use1-az6"}} {
		t.Run("format="+tt.format, func(t *testing.T) {
			detectEnv(t, map[string]string{
				"AZKAFKA_DETECT_PROVIDERS":          "",
				"AZKAFKA_AZ_FORMAT":                 tt.format,
				"ECS_CONTAINER_METADATA_URI_V4":     "http://" + hang + "/v4/x",
				"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL,
				"GCE_METADATA_HOST":                 hang,
				"AZKAFKA_AZURE_IMDS_ENDPOINT":       "http://" + hang,
			})
			var out, errOut bytes.Buffer
			if got := run([]string{"detect", "--json"}, strings.NewReader(""), &out, &errOut); got != exitOK {
				t.Fatalf("status = %d, want %d (stdout %s, stderr %q)", got, exitOK, out.String(), errOut.String())
			}
			var doc detectOutput
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("stdout %q: %v", out.String(), err)
			}
			if doc.AZ != tt.want || doc.Source != "ec2" {
				t.Errorf("az %q from %q, want %q from ec2", doc.AZ, doc.Source, tt.want)
			}
			if doc.ElapsedMS < budgetMS || doc.ElapsedMS > budgetMS+5000 {
				t.Errorf("elapsed_ms %v, want the 1000 ms budget", doc.ElapsedMS)
			}
			wantErr := map[string]string{
				"env":        "not configured",
				"ecs":        "no answer within the 1s budget",
				"ec2":        "",
				"gcp":        "no answer within the 1s budget",
				"azure":      "no answer within the 1s budget",
				"kubernetes": "not configured",
			}
			if len(doc.Providers) != len(wantErr) {
				t.Fatalf("providers %+v, want %d", doc.Providers, len(wantErr))
			}
			for _, p := range doc.Providers {
				want, ok := wantErr[p.Name]
				switch {
				case !ok:
					t.Errorf("unexpected provider %+v", p)
				case want == "" && (p.Error != "" || p.AZ != tt.want):
					t.Errorf("%s: %+v, want az %q", p.Name, p, tt.want)
				case want != "" && (!strings.Contains(p.Error, want) || p.AZ != ""):
					t.Errorf("%s: %+v, want error containing %q", p.Name, p, want)
				}
			}
		})
	}
}
