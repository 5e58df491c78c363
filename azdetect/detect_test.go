package azdetect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/azkafka/azkafka/internal/testkit/testpki"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func providerResult(t *testing.T, rs []ProviderResult, name string) ProviderResult {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for provider %q in %+v", name, rs)
	return ProviderResult{}
}

// Each provider alone against its protocol-faithful fake.
func TestProvidersAgainstFakes(t *testing.T) {
	tests := []struct {
		name     string
		format   Format
		setup    func(t *testing.T, cfg *Config) (count func() int64)
		want     string
		wantErr  error
		wantHits int64
	}{
		{
			name: "ec2 name", format: FormatName, want: "eu-west-1b", wantHits: 2,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeIMDS(t, "eu-west-1b", "euw1-az3")
				cfg.EC2Endpoint = f.URL
				return func() int64 { return f.tokenPuts.Load() + f.gets.Load() + f.unauthGets.Load() }
			},
		},
		{
			name: "ec2 id", format: FormatID, want: "euw1-az3", wantHits: 2,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeIMDS(t, "eu-west-1b", "euw1-az3")
				cfg.EC2Endpoint = f.URL
				return func() int64 { return f.tokenPuts.Load() + f.gets.Load() + f.unauthGets.Load() }
			},
		},
		{
			name: "gcp", format: FormatName, want: "us-central1-f", wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeGCP(t, "projects/123456789012/zones/us-central1-f")
				cfg.GCPHost = f.host()
				return f.gets.Load
			},
		},
		{
			name: "gcp id format returns the zone name", format: FormatID, want: "us-central1-f", wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeGCP(t, "projects/123456789012/zones/us-central1-f")
				cfg.GCPHost = f.host()
				return f.gets.Load
			},
		},
		{
			name: "azure", format: FormatName, want: "westeurope-2", wantHits: 2,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeAzure(t, "westeurope", "2")
				cfg.AzureEndpoint = f.URL
				return f.gets.Load
			},
		},
		{
			name: "azure VM without zone", format: FormatName, wantErr: ErrNoZone, wantHits: 2,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeAzure(t, "eastus", "")
				cfg.AzureEndpoint = f.URL
				return f.gets.Load
			},
		},
		{
			name: "azure id format", format: FormatID, wantErr: ErrNoZone, wantHits: 2,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeAzure(t, "eastus", "1")
				cfg.AzureEndpoint = f.URL
				return f.gets.Load
			},
		},
		{
			name: "ecs", format: FormatName, want: "eu-west-1c", wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeECS(t, ecsTask("eu-west-1c"))
				cfg.ECSMetadataURI = f.uri()
				return f.gets.Load
			},
		},
		{
			name: "ecs id format", format: FormatID, wantErr: ErrNoZone, wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeECS(t, ecsTask("eu-west-1c"))
				cfg.ECSMetadataURI = f.uri()
				return f.gets.Load
			},
		},
		{
			name: "ecs task without AvailabilityZone", format: FormatName, wantErr: ErrNoZone, wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeECS(t, `{"TaskARN":"arn:aws:ecs:eu-west-1:111122223333:task/x","Containers":[]}`)
				cfg.ECSMetadataURI = f.uri()
				return f.gets.Load
			},
		},
		{
			name: "kubernetes", format: FormatName, want: "us-east-2a", wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeK8s(t, "ip-10-0-1-17.ec2.internal", map[string]string{
					"topology.kubernetes.io/zone": "us-east-2a", "topology.k8s.aws/zone-id": "use2-az1",
					"kubernetes.io/os": "linux"})
				f.configure(cfg)
				return f.gets.Load
			},
		},
		{
			name: "kubernetes id", format: FormatID, want: "use2-az1", wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeK8s(t, "ip-10-0-1-17.ec2.internal", map[string]string{
					"topology.kubernetes.io/zone": "us-east-2a", "topology.k8s.aws/zone-id": "use2-az1"})
				f.configure(cfg)
				return f.gets.Load
			},
		},
		{
			name: "kubernetes node without label", format: FormatName, wantErr: ErrNoZone, wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeK8s(t, "worker-1", map[string]string{"kubernetes.io/os": "linux"})
				f.configure(cfg)
				return f.gets.Load
			},
		},
		{
			name: "kubernetes wrong token", format: FormatName, wantErr: ErrNotThisCloud, wantHits: 1,
			setup: func(t *testing.T, cfg *Config) func() int64 {
				f := newFakeK8s(t, "worker-1", map[string]string{"topology.kubernetes.io/zone": "z1"})
				f.token = "another-token"
				f.configure(cfg)
				return f.unauth.Load
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.Fields(tt.name)[0]
			cfg := baseConfig(t, name)
			cfg.Format = tt.format
			count := tt.setup(t, &cfg)
			res, err := New(cfg).Detect(context.Background())
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrNoAZ) {
					t.Fatalf("err = %v, want %v and ErrNoAZ", err, tt.wantErr)
				}
				var de *DetectError
				if !errors.As(err, &de) || len(de.Providers) != 1 || de.Providers[0].Name != name {
					t.Fatalf("err = %#v, want a DetectError with the one provider", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Detect: %v", err)
				}
				if res.AZ != tt.want || res.Source != name {
					t.Fatalf("got %q from %q, want %q from %q", res.AZ, res.Source, tt.want, name)
				}
			}
			if got := count(); got != tt.wantHits {
				t.Errorf("fake served %d requests, want %d", got, tt.wantHits)
			}
		})
	}
}

// A provider whose prerequisites are absent answers at once, without dialing.
func TestNotConfiguredNeedsNoNetwork(t *testing.T) {
	var dials atomic.Int64
	cfg := Config{
		Providers:   []string{SourceEnv, SourceECS, SourceEC2, SourceKubernetes},
		EC2Disabled: true,
		DialContext: loopbackDial(t, &dials),
	}
	_, err := New(cfg).Detect(context.Background())
	var de *DetectError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *DetectError", err)
	}
	if len(de.Providers) != 4 {
		t.Fatalf("providers = %+v, want 4", de.Providers)
	}
	for _, p := range de.Providers {
		if !errors.Is(p.Err, ErrNotConfigured) {
			t.Errorf("%s: err = %v, want ErrNotConfigured", p.Name, p.Err)
		}
		if p.Elapsed != 0 {
			t.Errorf("%s: elapsed %v, want 0 for a provider that did not run", p.Name, p.Elapsed)
		}
	}
	for _, want := range []string{EnvECSMetadataURI, EnvEC2Disabled + "=true", EnvKubernetesHost, EnvNodeName, EnvAZ} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d dials, want none", n)
	}
}

// With NODE_NAME and the API server known but no token mounted (the
// zero-RBAC set-up), the Kubernetes provider is "not configured".
func TestKubernetesWithoutTokenIsNotConfigured(t *testing.T) {
	cfg := baseConfig(t, SourceKubernetes)
	cfg.KubernetesHost, cfg.NodeName = "127.0.0.1", "worker-1"
	cfg.KubernetesTokenFile = t.TempDir() + "/absent"
	_, err := New(cfg).Detect(context.Background())
	if !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("err = %v, want ErrNotConfigured", err)
	}
}

// An explicit zone never touches the network; an invalid one fails
// detection instead of falling back to the metadata services.
func TestExplicit(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		want       string
		wantSource string
		wantErrIn  string
	}{
		{name: "option", cfg: Config{AZ: "us-east-1a"}, want: "us-east-1a", wantSource: SourceOption},
		{name: "option trimmed", cfg: Config{AZ: " us-east-1a\n"}, want: "us-east-1a", wantSource: SourceOption},
		{name: "env", cfg: Config{EnvAZ: "eu-west-1b", EnvAZVariable: EnvWarpStreamAZ}, want: "eu-west-1b", wantSource: SourceEnv},
		{name: "option beats env", cfg: Config{AZ: "a1", EnvAZ: "b2"}, want: "a1", wantSource: SourceOption},
		{name: "env ignored when not enabled", cfg: Config{EnvAZ: "b2", Providers: []string{SourceEC2}, EC2Disabled: true},
			wantErrIn: "ec2: not configured"},
		{name: "invalid option", cfg: Config{AZ: "us-east-1a,warpstream_interzone_lb=false"},
			wantErrIn: `option: Config.AZ="us-east-1a,warpstream_interzone_lb=false": invalid AZ: byte "," at offset 10`},
		{name: "invalid env", cfg: Config{EnvAZ: "US-EAST-1A"},
			wantErrIn: `env: AZKAFKA_AZ="US-EAST-1A": invalid AZ`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dials atomic.Int64
			tt.cfg.DialContext = loopbackDial(t, &dials)
			// Endpoints that would be dialed if any provider ran.
			tt.cfg.EC2Endpoint, tt.cfg.GCPHost, tt.cfg.AzureEndpoint = "http://127.0.0.1:9", "127.0.0.1:9", "http://127.0.0.1:9"
			res, err := New(tt.cfg).Detect(context.Background())
			if tt.wantErrIn != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrIn) || !errors.Is(err, ErrNoAZ) {
					t.Fatalf("err = %v, want ErrNoAZ containing %q", err, tt.wantErrIn)
				}
			} else if err != nil || res.AZ != tt.want || res.Source != tt.wantSource {
				t.Fatalf("got %+v, %v; want %q from %q", res, err, tt.want, tt.wantSource)
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("%d dials with an explicit zone, want none", n)
			}
		})
	}
}

// Precedence is fixed, whatever the order of arrival.
func TestPrecedence(t *testing.T) {
	t.Run("slower higher-ranked answer wins", func(t *testing.T) {
		cfg := baseConfig(t, SourceEC2, SourceGCP, SourceAzure)
		ec2 := newFakeIMDS(t, "us-east-1a", "use1-az4")
		ec2.delay = 150 * time.Millisecond
		gcp := newFakeGCP(t, "projects/1/zones/europe-west4-a")
		az := newFakeAzure(t, "eastus", "3")
		cfg.EC2Endpoint, cfg.GCPHost, cfg.AzureEndpoint = ec2.URL, gcp.host(), az.URL
		res, err := New(cfg).Detect(context.Background())
		if err != nil || res.AZ != "us-east-1a" || res.Source != SourceEC2 {
			t.Fatalf("got %+v, %v; want us-east-1a from ec2", res, err)
		}
		if got := providerResult(t, res.Providers, SourceGCP); got.AZ != "europe-west4-a" {
			t.Errorf("gcp result %+v: the fast lower-ranked answer should be recorded", got)
		}
	})
	t.Run("failed higher ranks let the next answer win", func(t *testing.T) {
		cfg := baseConfig(t, SourceECS, SourceEC2, SourceGCP, SourceAzure, SourceKubernetes)
		cfg.ECSMetadataURI = "http://" + refusedAddr(t) + "/v4/x" // refused
		gcp := newFakeGCP(t, "projects/1/zones/europe-west4-a")
		gcp.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool { http.NotFound(w, r); return true }
		az := newFakeAzure(t, "northeurope", "1")
		k8s := newFakeK8s(t, "n1", map[string]string{labelZone: "northeurope-2"})
		cfg.GCPHost, cfg.AzureEndpoint = gcp.host(), az.URL
		k8s.configure(&cfg)
		res, err := New(cfg).Detect(context.Background())
		if err != nil || res.AZ != "northeurope-1" || res.Source != SourceAzure {
			t.Fatalf("got %+v, %v; want northeurope-1 from azure", res, err)
		}
		for _, name := range []string{SourceECS, SourceEC2, SourceGCP} {
			if p := providerResult(t, res.Providers, name); !errors.Is(p.Err, ErrNotThisCloud) {
				t.Errorf("%s: err = %v, want ErrNotThisCloud", name, p.Err)
			}
		}
		if len(res.Providers) != 5 || res.Providers[0].Name != SourceECS || res.Providers[4].Name != SourceKubernetes {
			t.Errorf("providers not in precedence order: %+v", res.Providers)
		}
	})
	t.Run("answer found stops lower-ranked providers", func(t *testing.T) {
		cfg := baseConfig(t, SourceEC2, SourceGCP, SourceAzure)
		ec2 := newFakeIMDS(t, "ap-south-1a", "aps1-az1")
		hole := newBlackHole(t)
		cfg.EC2Endpoint = ec2.URL
		cfg.GCPHost, cfg.AzureEndpoint = hole.addr(), "http://"+hole.addr()
		cfg.Timeout = 30 * time.Second // a hang would show as a test timeout
		res, err := New(cfg).Detect(context.Background())
		if err != nil || res.AZ != "ap-south-1a" {
			t.Fatalf("got %+v, %v", res, err)
		}
		for _, name := range []string{SourceGCP, SourceAzure} {
			if p := providerResult(t, res.Providers, name); !errors.Is(p.Err, ErrSuperseded) {
				t.Errorf("%s: err = %v, want ErrSuperseded", name, p.Err)
			}
		}
		if res.Elapsed > 10*time.Second {
			t.Errorf("elapsed %v: waited for the black holes", res.Elapsed)
		}
	})
}

// Every provider pointed at listeners that accept and never answer: the
// detection ends with the budget and leaves no goroutine behind.
func TestBudgetAgainstBlackHoles(t *testing.T) {
	hole := newBlackHole(t)
	k8s := newFakeK8s(t, "n1", nil) // for its token and CA files only
	cfg := baseConfig(t)
	cfg.Timeout = time.Second
	cfg.ECSMetadataURI = "http://" + hole.addr() + "/v4/x"
	cfg.EC2Endpoint = "http://" + hole.addr()
	cfg.GCPHost = hole.addr()
	cfg.AzureEndpoint = "http://" + hole.addr()
	k8s.configure(&cfg)
	host, port, _ := strings.Cut(hole.addr(), ":")
	cfg.KubernetesHost, cfg.KubernetesPort = host, port

	leaks := goleak.IgnoreCurrent()
	res, err := New(cfg).Detect(context.Background())
	if err == nil {
		t.Fatalf("got %+v from black holes", res)
	}
	var de *DetectError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a DetectError matching context.DeadlineExceeded", err)
	}
	for _, p := range de.Providers[1:] { // [0] is env, not configured
		if !errors.Is(p.Err, context.DeadlineExceeded) || !strings.Contains(p.Err.Error(), "1s budget") {
			t.Errorf("%s: err = %v, want the budget error", p.Name, p.Err)
		}
	}
	if de.Elapsed < cfg.Timeout || de.Elapsed > 5*time.Second {
		t.Errorf("elapsed %v for a %v budget", de.Elapsed, cfg.Timeout)
	}
	if n := hole.accepted.Load(); n < 5 {
		t.Errorf("black hole accepted %d connections, want one per provider (5)", n)
	}
	goleak.VerifyNone(t, leaks)
}

// The caller's own context bounds the detection too.
func TestCallerContext(t *testing.T) {
	ec2 := newFakeIMDS(t, "us-west-2d", "usw2-az4")
	var hang atomic.Bool
	hang.Store(true)
	ec2.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
		if hang.Load() {
			<-r.Context().Done()
			return true
		}
		return false
	}
	cfg := baseConfig(t, SourceEC2)
	cfg.EC2Endpoint = ec2.URL
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	d := New(cfg)
	_, err := d.Detect(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNoAZ) {
		t.Fatalf("err = %v, want context.Canceled and ErrNoAZ", err)
	}
	// Not cached: the next call detects again.
	hang.Store(false)
	res, err := d.Detect(context.Background())
	if err != nil || res.AZ != "us-west-2d" {
		t.Fatalf("after a cancelled detection: %+v, %v; want a new detection", res, err)
	}
}

// Refused connections and 4xx are final at once: the GCP client's own
// retries must not run.
func TestNoRetries(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			cfg := baseConfig(t, SourceEC2, SourceGCP, SourceAzure)
			ec2 := newFakeIMDS(t, "", "")
			var ec2Hits atomic.Int64
			ec2.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
				ec2Hits.Add(1)
				w.WriteHeader(status)
				return true
			}
			gcp := newFakeGCP(t, "")
			gcp.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool { w.WriteHeader(status); return true }
			az := newFakeAzure(t, "", "")
			az.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool { w.WriteHeader(status); return true }
			cfg.EC2Endpoint, cfg.GCPHost, cfg.AzureEndpoint = ec2.URL, gcp.host(), az.URL
			_, err := New(cfg).Detect(context.Background())
			if err == nil {
				t.Fatal("detection succeeded against failing servers")
			}
			if n := ec2Hits.Load(); n != 1 {
				t.Errorf("ec2: %d requests, want 1 (token PUT, no retry)", n)
			}
			if n := gcp.gets.Load(); n != 1 {
				t.Errorf("gcp: %d requests, want 1", n)
			}
			if n := az.gets.Load(); n != 1 {
				t.Errorf("azure: %d requests, want 1", n)
			}
			if status < 500 && !errors.Is(err, ErrNotThisCloud) {
				t.Errorf("err = %v, want ErrNotThisCloud for %d", err, status)
			}
		})
	}
}

// One detection per Detector, shared by concurrent callers; Redetect
// forces a new round. Counted on the fake server.
func TestDetectorCache(t *testing.T) {
	ec2 := newFakeIMDS(t, "sa-east-1b", "sae1-az2")
	ec2.delay = 20 * time.Millisecond
	cfg := baseConfig(t, SourceEC2)
	cfg.EC2Endpoint = ec2.URL
	d := New(cfg)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := d.Detect(context.Background()); err != nil || res.AZ != "sa-east-1b" {
				t.Errorf("Detect: %+v, %v", res, err)
			}
		}()
	}
	wg.Wait()
	if p, g := ec2.tokenPuts.Load(), ec2.gets.Load(); p != 1 || g != 1 {
		t.Fatalf("%d token PUTs and %d GETs for 16 callers, want 1 and 1", p, g)
	}
	if _, err := d.Redetect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p, g := ec2.tokenPuts.Load(), ec2.gets.Load(); p != 2 || g != 2 {
		t.Fatalf("after Redetect: %d token PUTs and %d GETs, want 2 and 2", p, g)
	}
}

// resetProcessCache forgets the process-wide outcome.
func resetProcessCache(t *testing.T) {
	process.mu.Lock()
	process.done, process.run = nil, nil
	process.mu.Unlock()
	t.Cleanup(func() {
		process.mu.Lock()
		process.done, process.run = nil, nil
		process.mu.Unlock()
	})
}

// clearEnv unsets every variable ConfigFromEnv reads.
func clearEnv(t *testing.T) {
	for _, v := range []string{EnvAZ, EnvWarpStreamAZ, EnvAZFormat, EnvDetectProviders, EnvDetectTimeout,
		EnvECSMetadataURI, EnvEC2Endpoint, EnvEC2EndpointMode, EnvEC2Disabled, EnvGCEMetadataHost,
		EnvAzureEndpoint, EnvKubernetesHost, EnvKubernetesPort, EnvNodeName, EnvKubernetesToken, EnvKubernetesCA} {
		t.Setenv(v, "")
	}
}

// The package-level Detect: one network round per process, concurrent
// first callers included; failures cached too; Redetect re-reads the env.
func TestProcessCache(t *testing.T) {
	resetProcessCache(t)
	clearEnv(t)
	ec2 := newFakeIMDS(t, "ca-central-1a", "cac1-az1")
	ec2.delay = 20 * time.Millisecond
	t.Setenv(EnvDetectProviders, "env,ec2")
	t.Setenv(EnvEC2Endpoint, ec2.URL)

	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := Detect(context.Background()); err != nil || res.AZ != "ca-central-1a" || res.Source != SourceEC2 {
				t.Errorf("Detect: %+v, %v", res, err)
			}
		}()
	}
	wg.Wait()
	if p, g := ec2.tokenPuts.Load(), ec2.gets.Load(); p != 1 || g != 1 {
		t.Fatalf("%d token PUTs and %d GETs for 16 callers, want 1 and 1", p, g)
	}

	// The env changes; Detect keeps the cached answer, Redetect sees it.
	t.Setenv(EnvAZ, "ca-central-1d")
	if res, _ := Detect(context.Background()); res.AZ != "ca-central-1a" {
		t.Fatalf("cached Detect = %q, want ca-central-1a", res.AZ)
	}
	if res, err := Redetect(context.Background()); err != nil || res.AZ != "ca-central-1d" || res.Source != SourceEnv {
		t.Fatalf("Redetect = %+v, %v; want ca-central-1d from env", res, err)
	}
	if res, _ := Detect(context.Background()); res.AZ != "ca-central-1d" {
		t.Fatalf("Detect after Redetect = %q", res.AZ)
	}

	// A failure is cached as well.
	t.Setenv(EnvAZ, "")
	ec2.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool { http.NotFound(w, r); return true }
	_, err1 := Redetect(context.Background())
	puts := ec2.tokenPuts.Load()
	_, err2 := Detect(context.Background())
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
		t.Fatalf("errors %v / %v, want the same cached failure", err1, err2)
	}
	if ec2.tokenPuts.Load() != puts {
		t.Error("a cached failure went to the network again")
	}

	// A bad environment is a DetectError with the Config error.
	t.Setenv(EnvDetectTimeout, "soon")
	_, err := Redetect(context.Background())
	var de *DetectError
	if !errors.As(err, &de) || de.Config == nil || !errors.Is(err, ErrNoAZ) ||
		!strings.Contains(err.Error(), `AZKAFKA_DETECT_TIMEOUT="soon"`) {
		t.Fatalf("err = %v, want a config DetectError naming the variable", err)
	}
}

// The Kubernetes provider trusts only the configured CA, and explains a 403.
func TestKubernetesTLSAndRBAC(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(t *testing.T, f *fakeK8s, cfg *Config)
		wantErr string
		wantIs  error
	}{
		{
			name: "another cluster's CA",
			mutate: func(t *testing.T, f *fakeK8s, cfg *Config) {
				cfg.KubernetesCAFile = writeOtherCA(t)
			},
			wantErr: "certificate",
		},
		{
			name: "CA file without PEM",
			mutate: func(t *testing.T, f *fakeK8s, cfg *Config) {
				cfg.KubernetesCAFile = f.tokenFile
			},
			wantErr: "holds no PEM certificate",
		},
		{
			name: "forbidden",
			mutate: func(t *testing.T, f *fakeK8s, cfg *Config) {
				f.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
					w.WriteHeader(http.StatusForbidden)
					fmt.Fprint(w, `{"kind":"Status","status":"Failure","message":"nodes \"n1\" is forbidden: User \"system:serviceaccount:default:app\" cannot get resource \"nodes\"","reason":"Forbidden","code":403}`)
					return true
				}
			},
			wantErr: `the service account needs "get" on "nodes"`,
			wantIs:  ErrNotThisCloud,
		},
		{
			name: "answer about another node",
			mutate: func(t *testing.T, f *fakeK8s, cfg *Config) {
				f.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
					fmt.Fprintf(w, `{"kind":"Node","metadata":{"name":"n2","labels":{%q:"us-east-1a"}}}`, labelZone)
					return true
				}
			},
			wantErr: `answer names node "n2", want "n1"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeK8s(t, "n1", map[string]string{labelZone: "us-east-1a"})
			cfg := baseConfig(t, SourceKubernetes)
			f.configure(&cfg)
			tt.mutate(t, f, &cfg)
			_, err := New(cfg).Detect(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want it to match %v", err, tt.wantIs)
			}
		})
	}
}

// writeOtherCA writes a freshly generated CA certificate, one that did not
// sign the fake API server's certificate, and returns its path.
func writeOtherCA(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other-ca.crt")
	if err := os.WriteFile(path, testpki.NewCA(t, "other-cluster-ca").PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A token path that names a FIFO (or a device) is an error naming it, at
// once: opening a FIFO blocks until a writer comes, past any budget.
func TestKubernetesTokenNotARegularFile(t *testing.T) {
	cfg := baseConfig(t, SourceKubernetes)
	cfg.KubernetesHost, cfg.NodeName = "127.0.0.1", "worker-1"
	cfg.KubernetesTokenFile = filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(cfg.KubernetesTokenFile, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := New(cfg).Detect(context.Background())
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), cfg.KubernetesTokenFile+": not a regular file") {
			t.Fatalf("err = %v, want one naming %s, not a regular file", err, cfg.KubernetesTokenFile)
		}
	case <-ctx.Done():
		t.Fatal("detection did not return: it opened the FIFO")
	}
}
