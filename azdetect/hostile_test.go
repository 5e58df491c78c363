package azdetect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const injection = "us-east-1a,warpstream_interzone_lb=false"

// hostileTarget puts one provider behind a handler hook and says what a
// well-formed answer carrying value looks like for it.
type hostileTarget struct {
	name string
	// setup installs hook (called for the requests that matter) and returns
	// the number of requests the fake saw.
	setup func(t *testing.T, cfg *Config, hook func(http.ResponseWriter, *http.Request) bool) func() int64
	// answer returns a well-formed body carrying the zone value.
	answer func(value string) string
}

var hostileTargets = []hostileTarget{
	{
		name: SourceEC2,
		setup: func(t *testing.T, cfg *Config, hook func(http.ResponseWriter, *http.Request) bool) func() int64 {
			f := newFakeIMDS(t, "", "")
			// The token exchange stays honest; the metadata GET is hostile.
			f.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path == "/latest/api/token" || r.Header.Get("X-aws-ec2-metadata-token") != imdsToken {
					return false
				}
				f.gets.Add(1)
				return hook(w, r)
			}
			cfg.EC2Endpoint = f.URL
			return f.gets.Load
		},
		answer: func(v string) string { return v },
	},
	{
		name: SourceGCP,
		setup: func(t *testing.T, cfg *Config, hook func(http.ResponseWriter, *http.Request) bool) func() int64 {
			f := newFakeGCP(t, "")
			f.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Metadata-Flavor", "Google")
				return hook(w, r)
			}
			cfg.GCPHost = f.host()
			return f.gets.Load
		},
		answer: func(v string) string { return "projects/123/zones/" + v },
	},
	{
		name: SourceAzure,
		setup: func(t *testing.T, cfg *Config, hook func(http.ResponseWriter, *http.Request) bool) func() int64 {
			f := newFakeAzure(t, "", "")
			f.handlerWrap = hook
			cfg.AzureEndpoint = f.URL
			return f.gets.Load
		},
		answer: func(v string) string { return v },
	},
	{
		name: SourceECS,
		setup: func(t *testing.T, cfg *Config, hook func(http.ResponseWriter, *http.Request) bool) func() int64 {
			f := newFakeECS(t, "")
			f.handlerWrap = hook
			cfg.ECSMetadataURI = f.uri()
			return f.gets.Load
		},
		answer: ecsTask,
	},
	{
		name: SourceKubernetes,
		setup: func(t *testing.T, cfg *Config, hook func(http.ResponseWriter, *http.Request) bool) func() int64 {
			f := newFakeK8s(t, "node-7", nil)
			f.handlerWrap = hook
			f.configure(cfg)
			return f.gets.Load
		},
		answer: func(v string) string {
			return fmt.Sprintf(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"node-7","labels":{%q:%q}}}`, labelZone, v)
		},
	},
}

func TestHostileServers(t *testing.T) {
	const budget = 400 * time.Millisecond
	type hostileCase struct {
		name   string
		budget time.Duration // default: generous, the case must fail on the answer
		handle func(tg hostileTarget, redirected *atomic.Int64) func(http.ResponseWriter, *http.Request) bool
		check  func(t *testing.T, err error)
	}
	body := func(status int, s string) func(hostileTarget, *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
		return func(hostileTarget, *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(status)
				fmt.Fprint(w, s)
				return true
			}
		}
	}
	notBudget := func(t *testing.T, err error) {
		t.Helper()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v: should fail on the answer, not the budget", err)
		}
	}
	cases := []hostileCase{
		{
			name:   "html page",
			handle: body(200, "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"),
			check:  notBudget,
		},
		{
			name:   "empty body",
			handle: body(200, ""),
			check:  notBudget,
		},
		{
			name:   "server error",
			handle: body(500, "internal error"),
			check: func(t *testing.T, err error) {
				notBudget(t, err)
				if !strings.Contains(err.Error(), "500") {
					t.Errorf("err = %v, want it to name the 500", err)
				}
			},
		},
		{
			name: "redirect",
			handle: func(tg hostileTarget, redirected *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Query().Get("redirected") != "" {
						redirected.Add(1)
						fmt.Fprint(w, tg.answer("us-east-1a"))
						return true
					}
					u := *r.URL
					q := u.Query()
					q.Set("redirected", "1")
					u.RawQuery = q.Encode()
					http.Redirect(w, r, u.String(), http.StatusFound)
					return true
				}
			},
			check: func(t *testing.T, err error) {
				notBudget(t, err)
				if !strings.Contains(err.Error(), "302") {
					t.Errorf("err = %v, want it to name the 302", err)
				}
			},
		},
		{
			name: "huge body",
			handle: func(tg hostileTarget, _ *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					chunk := strings.Repeat("a", 64<<10)
					for range 64 { // 4 MiB, far past every cap
						if _, err := fmt.Fprint(w, chunk); err != nil {
							return true
						}
					}
					return true
				}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, errBodyTooLarge) {
					t.Errorf("err = %v, want errBodyTooLarge", err)
				}
			},
		},
		{
			name:   "trickle",
			budget: budget,
			handle: func(tg hostileTarget, _ *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					w.WriteHeader(200)
					for i := 0; ; i++ {
						if _, err := w.Write([]byte{"us-east-1a"[i%10]}); err != nil {
							return true
						}
						w.(http.Flusher).Flush()
						select {
						case <-r.Context().Done():
							return true
						case <-time.After(20 * time.Millisecond):
						}
					}
				}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want the budget to cut it", err)
				}
			},
		},
		{
			name:   "headers never come",
			budget: budget,
			handle: func(tg hostileTarget, _ *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					<-r.Context().Done()
					return true
				}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want the budget to cut it", err)
				}
			},
		},
		{
			name: "separator injection",
			handle: func(tg hostileTarget, _ *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					fmt.Fprint(w, tg.answer(injection))
					return true
				}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrInvalidAZ) || !strings.Contains(err.Error(), `warpstream_interzone_lb=false"`) {
					t.Errorf("err = %v, want ErrInvalidAZ quoting the value", err)
				}
			},
		},
		{
			name: "uppercase zone",
			handle: func(tg hostileTarget, _ *atomic.Int64) func(http.ResponseWriter, *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					fmt.Fprint(w, tg.answer("US-EAST-1A"))
					return true
				}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrInvalidAZ) {
					t.Errorf("err = %v, want ErrInvalidAZ", err)
				}
			},
		},
	}
	for _, tg := range hostileTargets {
		for _, hc := range cases {
			t.Run(tg.name+"/"+hc.name, func(t *testing.T) {
				cfg := baseConfig(t, tg.name)
				cfg.Timeout = hc.budget
				if cfg.Timeout == 0 {
					cfg.Timeout = 10 * time.Second
				}
				var redirected atomic.Int64
				count := tg.setup(t, &cfg, hc.handle(tg, &redirected))
				start := time.Now()
				res, err := New(cfg).Detect(context.Background())
				if err == nil {
					t.Fatalf("hostile server gave %+v", res)
				}
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("took %v", took)
				}
				var de *DetectError
				if !errors.As(err, &de) || len(de.Providers) != 1 {
					t.Fatalf("err = %v, want a DetectError with one provider", err)
				}
				hc.check(t, de.Providers[0].Err)
				if count() == 0 {
					t.Error("the hostile server was never asked")
				}
				if n := redirected.Load(); n != 0 {
					t.Errorf("redirect followed %d times", n)
				}
			})
		}
	}
}

// The GCP provider rejects an answer without the Metadata-Flavor header:
// something else listens on the address.
func TestGCPRequiresFlavorHeader(t *testing.T) {
	f := newFakeGCP(t, "")
	f.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
		fmt.Fprint(w, "projects/1/zones/us-east1-b")
		return true
	}
	cfg := baseConfig(t, SourceGCP)
	cfg.GCPHost = f.host()
	_, err := New(cfg).Detect(context.Background())
	if !errors.Is(err, ErrNotThisCloud) || !strings.Contains(err.Error(), "Metadata-Flavor") {
		t.Fatalf("err = %v, want ErrNotThisCloud about Metadata-Flavor", err)
	}
	if n := f.gets.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// The metadata transport never uses an HTTP proxy (Azure IMDS refuses
// proxied requests, and the answer must come from the host itself).
func TestMetadataTransportHasNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:9")
	d := New(Config{DialContext: loopbackDial(t, nil)})
	tr := d.newTransport(nil)
	if tr.Proxy != nil {
		t.Fatal("metadata transport has a Proxy func")
	}
	if !tr.DisableKeepAlives {
		t.Error("keep-alive left on: idle connections would outlive Detect")
	}
}
