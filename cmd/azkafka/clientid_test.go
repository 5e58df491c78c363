package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/sdk"
)

// withClientIDEnv makes `azkafka clientid` see only env, and fails the test
// if it tries to detect the zone when want is false.
func withClientIDEnv(t *testing.T, env map[string]string, detect func(context.Context) (azdetect.Result, error)) {
	t.Helper()
	oldGetenv, oldDetect, oldEnviron := clientIDGetenv, clientIDDetect, clientIDEnviron
	t.Cleanup(func() { clientIDGetenv, clientIDDetect, clientIDEnviron = oldGetenv, oldDetect, oldEnviron })
	clientIDGetenv = func(k string) string { return env[k] }
	clientIDEnviron = func() []string {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		return kv
	}
	if detect == nil {
		detect = func(context.Context) (azdetect.Result, error) {
			t.Error("detection ran although AZKAFKA_AZ was set")
			return azdetect.Result{}, azdetect.ErrNoAZ
		}
	}
	clientIDDetect = detect
}

const cliSession = "6f1c2a4e-8b3d-4e5f-a6b7-c8d9e0f1a2b3"

func TestClientIDCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		detect     func(context.Context) (azdetect.Result, error)
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		{name: "plain", env: map[string]string{"AZKAFKA_AZ": "us-east-1a", "AZKAFKA_SESSION_ID": cliSession, "AZKAFKA_CLIENT_ID": "billing"},
			wantOut: "billing,warpstream_session_id=" + cliSession + ",warpstream_az=us-east-1a,warpstream_interzone_lb=true\n"},
		{name: "interzone off", env: map[string]string{"AZKAFKA_AZ": "use1-az4", "AZKAFKA_SESSION_ID": cliSession, "AZKAFKA_INTERZONE_LB": "false"},
			wantOut: "warpstream_session_id=" + cliSession + ",warpstream_az=use1-az4\n"},
		{name: "unknown AZ", env: map[string]string{"AZKAFKA_SESSION_ID": cliSession},
			detect: func(context.Context) (azdetect.Result, error) {
				return azdetect.Result{}, errors.Join(azdetect.ErrNoAZ, errors.New("no provider configured"))
			},
			wantOut: "warpstream_session_id=" + cliSession + ",warpstream_interzone_lb=true\n", wantErr: "availability zone unknown"},
		{name: "invalid rate", env: map[string]string{"AZKAFKA_AZ": "a", "AZKAFKA_MAX_CONN_RATE": "abc"},
			wantStatus: exitUsage, wantErr: `invalid configuration: sdk: AZKAFKA_MAX_CONN_RATE="abc": not a number`},
		{name: "invalid AZ", env: map[string]string{"AZKAFKA_AZ": "us-east-1a,warpstream_az=x"},
			wantStatus: exitUsage, wantErr: `AZKAFKA_AZ="us-east-1a,warpstream_az=x"`},
		{name: "invalid session", env: map[string]string{"AZKAFKA_AZ": "a", "AZKAFKA_SESSION_ID": "abc"},
			wantStatus: exitUsage, wantErr: `AZKAFKA_SESSION_ID="abc": not a UUID`},
		{name: "unknown flag", args: []string{"--yaml"}, env: map[string]string{"AZKAFKA_AZ": "a"},
			wantStatus: exitUsage, wantErr: "flag provided but not defined: -yaml"},
		{name: "extra argument", args: []string{"x"}, env: map[string]string{"AZKAFKA_AZ": "a"},
			wantStatus: exitUsage, wantErr: `unexpected argument "x"`},
		{name: "help", args: []string{"-h"}, wantOut: "Usage: azkafka clientid [--json]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withClientIDEnv(t, tt.env, tt.detect)
			var out, errOut bytes.Buffer
			got := run(append([]string{"clientid"}, tt.args...), strings.NewReader(""), &out, &errOut)
			if got != tt.wantStatus {
				t.Errorf("status = %d, want %d (stderr %q)", got, tt.wantStatus, errOut.String())
			}
			if tt.wantStatus == exitOK && !strings.Contains(out.String(), tt.wantOut) || tt.wantStatus != exitOK && out.Len() != 0 {
				t.Errorf("stdout = %q, want %q", out.String(), tt.wantOut)
			}
			if !strings.Contains(errOut.String(), tt.wantErr) || tt.wantErr == "" && errOut.Len() != 0 {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tt.wantErr)
			}
		})
	}
}

func TestClientIDCommandJSON(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "eu-west-1b", "AZKAFKA_CLIENT_ID": "app,team=pay"}, nil)
	var out, errOut bytes.Buffer
	if got := run([]string{"clientid", "--json"}, strings.NewReader(""), &out, &errOut); got != exitOK {
		t.Fatalf("status %d, stderr %q", got, errOut.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"client_id", "session_id", "az", "az_source", "interzone_lb", "writer_idempotent", "writer_idempotence",
		"reader_fetch_from_follower", "reader_group_protocol"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("key %q missing from %s", k, out.String())
		}
	}
	if len(doc) != 9 {
		t.Errorf("keys %v, want exactly nine", doc)
	}
	if doc["reader_fetch_from_follower"] != true || doc["reader_group_protocol"] != "classic" {
		t.Errorf("with the AZ known and no settings: reader_fetch_from_follower %v, reader_group_protocol %v; want true, classic",
			doc["reader_fetch_from_follower"], doc["reader_group_protocol"])
	}
	parts, err := sdk.ParseClientID(doc["client_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.ClientIDParts{UserID: "app,team=pay", SessionID: doc["session_id"].(string), AZ: "eu-west-1b", InterzoneLB: true}
	if parts != want {
		t.Fatalf("client ID parts %+v, want %+v", parts, want)
	}
	if doc["az"] != "eu-west-1b" || doc["az_source"] != "env" || doc["interzone_lb"] != true {
		t.Fatalf("doc %v", doc)
	}
	if doc["writer_idempotent"] != true || doc["writer_idempotence"] != "auto: RequiredAcks is RequireAll" {
		t.Fatalf("writer idempotence %v %v, want true and auto", doc["writer_idempotent"], doc["writer_idempotence"])
	}
}

func TestClientIDCommandWriterIdempotence(t *testing.T) {
	for _, tc := range []struct {
		env, acks string
		want      bool
		why       string
	}{
		{"", "one", false, "auto: RequiredAcks is RequireOne, not RequireAll"},
		{"false", "all", false, "AZKAFKA_IDEMPOTENCE=false"},
		{"true", "all", true, "AZKAFKA_IDEMPOTENCE=true"},
		{"true", "none", false, "NewWriter would fail: AZKAFKA_IDEMPOTENCE=true needs kafka.Writer.RequiredAcks = kafka.RequireAll"},
	} {
		withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a", "AZKAFKA_IDEMPOTENCE": tc.env}, nil)
		var out, errOut bytes.Buffer
		if got := run([]string{"clientid", "--json", "--acks", tc.acks}, strings.NewReader(""), &out, &errOut); got != exitOK {
			t.Fatalf("env %q acks %s: status %d, stderr %q", tc.env, tc.acks, got, errOut.String())
		}
		var doc struct {
			On  bool   `json:"writer_idempotent"`
			Why string `json:"writer_idempotence"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.On != tc.want || !strings.HasPrefix(doc.Why, tc.why) {
			t.Errorf("env %q acks %s: %v %q, want %v %q", tc.env, tc.acks, doc.On, doc.Why, tc.want, tc.why)
		}
	}
	var out, errOut bytes.Buffer
	if got := run([]string{"clientid", "--acks", "two"}, strings.NewReader(""), &out, &errOut); got != exitUsage || !strings.Contains(errOut.String(), `--acks="two"`) {
		t.Fatalf("--acks two: status %d, stderr %q", got, errOut.String())
	}
}

func TestClientIDWarnsOfUnknownVariables(t *testing.T) {
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a", "AZKAFKA_IDEMPOTANCE": "false"}, nil)
	var stdout, stderr bytes.Buffer
	if st := run([]string{"clientid"}, nil, &stdout, &stderr); st != exitOK {
		t.Fatalf("status %d: %s", st, stderr.String())
	}
	if want := "azkafka clientid: warning: sdk: AZKAFKA_IDEMPOTANCE: unknown variable; did you mean AZKAFKA_IDEMPOTENCE? (it is ignored)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
