package azdetect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// What happens when the budget, or the caller's ctx, ends before every
// provider has answered: the highest-ranked valid answer in wins.

// budgetSlack bounds how far past the budget a detection that was cut may
// return in these tests: generous, for a loaded 2-core machine running the
// race detector. How far past it really returns is measured by
// BenchmarkDetectBudgetAnswer.
const budgetSlack = 5 * time.Second

// zoneFake is a provider's loopback fake, answering its zone.
type zoneFake struct {
	serve http.HandlerFunc                               // the fake's own handler
	wrap  *func(http.ResponseWriter, *http.Request) bool // its handlerWrap hook
	last  func(*http.Request) bool                       // the request that carries the zone
}

// budgetTarget is one network provider: a fake that answers, or a listener
// that accepts and never answers.
type budgetTarget struct {
	name string
	// zones is what the provider detects in each format; absent: it has
	// no zone to give in that format (ErrNoZone).
	zones  map[Format]string
	answer func(t *testing.T, cfg *Config) zoneFake
	hang   func(t *testing.T, cfg *Config, hole *blackHole)
}

// budgetTargets are the five network providers, in precedence order.
var budgetTargets = []budgetTarget{
	{
		name:  SourceECS,
		zones: map[Format]string{FormatName: "eu-west-1c"},
		answer: func(t *testing.T, cfg *Config) zoneFake {
			f := newFakeECS(t, ecsTask("eu-west-1c"))
			cfg.ECSMetadataURI = f.uri()
			return zoneFake{f.serve, &f.handlerWrap, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/task") }}
		},
		hang: func(t *testing.T, cfg *Config, hole *blackHole) {
			cfg.ECSMetadataURI = "http://" + hole.addr() + "/v4/x"
		},
	},
	{
		name:  SourceEC2,
		zones: map[Format]string{FormatName: "us-east-1a", FormatID: "use1-az6"},
		answer: func(t *testing.T, cfg *Config) zoneFake {
			f := newFakeIMDS(t, "us-east-1a", "use1-az6")
			cfg.EC2Endpoint = f.URL
			return zoneFake{f.serve, &f.handlerWrap, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/latest/meta-data/") }}
		},
		hang: func(t *testing.T, cfg *Config, hole *blackHole) { cfg.EC2Endpoint = "http://" + hole.addr() },
	},
	{
		name:  SourceGCP,
		zones: map[Format]string{FormatName: "us-central1-f", FormatID: "us-central1-f"},
		answer: func(t *testing.T, cfg *Config) zoneFake {
			f := newFakeGCP(t, "projects/123456789012/zones/us-central1-f")
			cfg.GCPHost = f.host()
			return zoneFake{f.serve, &f.handlerWrap, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/instance/zone") }}
		},
		hang: func(t *testing.T, cfg *Config, hole *blackHole) { cfg.GCPHost = hole.addr() },
	},
	{
		name:  SourceAzure,
		zones: map[Format]string{FormatName: "westeurope-2"},
		answer: func(t *testing.T, cfg *Config) zoneFake {
			f := newFakeAzure(t, "westeurope", "2")
			cfg.AzureEndpoint = f.URL
			return zoneFake{f.serve, &f.handlerWrap, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/compute/zone") }}
		},
		hang: func(t *testing.T, cfg *Config, hole *blackHole) { cfg.AzureEndpoint = "http://" + hole.addr() },
	},
	{
		name:  SourceKubernetes,
		zones: map[Format]string{FormatName: "us-east-2a", FormatID: "use2-az1"},
		answer: func(t *testing.T, cfg *Config) zoneFake {
			f := newFakeK8s(t, "node-3", map[string]string{labelZone: "us-east-2a", labelZoneID: "use2-az1"})
			f.configure(cfg)
			return zoneFake{f.serve, &f.handlerWrap, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/v1/nodes/") }}
		},
		hang: func(t *testing.T, cfg *Config, hole *blackHole) {
			newFakeK8s(t, "node-3", nil).configure(cfg) // its token and CA files
			host, port, _ := strings.Cut(hole.addr(), ":")
			cfg.KubernetesHost, cfg.KubernetesPort = host, port
		},
	},
}

// checkOutcome checks what every outcome must satisfy: each provider has a
// zone or an error, never both or neither; a Result carries the zone of the
// highest-ranked provider that has one; a DetectError lists none.
func checkOutcome(t *testing.T, res Result, err error) []ProviderResult {
	t.Helper()
	prs := res.Providers
	if err != nil {
		var de *DetectError
		if !errors.As(err, &de) {
			t.Fatalf("err = %v, want a *DetectError", err)
		}
		prs = de.Providers
	}
	first := -1
	for i, p := range prs {
		if (p.AZ == "") == (p.Err == nil) {
			t.Errorf("%s: AZ %q and Err %v: want exactly one of them", p.Name, p.AZ, p.Err)
		}
		if p.Err == nil && first < 0 {
			first = i
		}
	}
	switch {
	case err != nil && first >= 0:
		t.Errorf("detection failed (%v) although %s answered %q", err, prs[first].Name, prs[first].AZ)
	case err == nil && first < 0:
		t.Errorf("result %q from %q, but no provider has a zone", res.AZ, res.Source)
	case err == nil && (prs[first].Name != res.Source || prs[first].AZ != res.AZ):
		t.Errorf("result %q from %q, but the highest-ranked answer is %q from %q", res.AZ, res.Source, prs[first].AZ, prs[first].Name)
	}
	return prs
}

// wantBudgetCut checks that p reports being cut by a budget of d.
func wantBudgetCut(t *testing.T, p ProviderResult, d time.Duration) {
	t.Helper()
	if want := fmt.Sprintf("no answer within the %v budget", d); !errors.Is(p.Err, context.DeadlineExceeded) || p.Err.Error() != want {
		t.Errorf("%s: err = %v, want %q (matching context.DeadlineExceeded)", p.Name, p.Err, want)
	}
}

// silentUntilCut makes f receive the zone request and answer nothing until
// the client gives up; cut is closed then.
func silentUntilCut(f zoneFake) (cut chan struct{}) {
	cut = make(chan struct{})
	*f.wrap = func(w http.ResponseWriter, r *http.Request) bool {
		if !f.last(r) {
			return false
		}
		<-r.Context().Done()
		close(cut)
		return true
	}
	return cut
}

// detectCase is one detection of a table whose detections run at the same
// time: most of them wait for the budget, and t.Parallel would run only
// GOMAXPROCS of them at once.
type detectCase struct {
	name  string
	cfg   Config
	check func(t *testing.T, res Result, err error)
}

// detectAll runs every case's detection concurrently, then checks each
// outcome in its own subtest.
func detectAll(t *testing.T, cases []detectCase) {
	type outcome struct {
		res Result
		err error
	}
	outs := make([]outcome, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i].res, outs[i].err = New(c.cfg).Detect(context.Background())
		}()
	}
	wg.Wait()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t, outs[i].res, outs[i].err) })
	}
}

// Every pair of network providers, in both formats: the higher-ranked one
// hangs (a listener that accepts and never answers, or a server that reads
// the request and answers only after the client gave up), the lower one
// answers at once. The lower answer wins at the end of the budget, and the
// higher one reports the budget.
func TestBudgetKeepsLowerAnswer(t *testing.T) {
	const budget = 2 * time.Second // the lower answers take milliseconds
	var cases []detectCase
	for _, format := range []Format{FormatName, FormatID} {
		for hi, higher := range budgetTargets {
			for _, lower := range budgetTargets[hi+1:] {
				for _, kind := range []string{"blackhole", "silent"} {
					cfg := baseConfig(t, higher.name, lower.name)
					cfg.Format, cfg.Timeout = format, budget
					var cut chan struct{}
					if kind == "blackhole" {
						higher.hang(t, &cfg, newBlackHole(t))
					} else {
						cut = silentUntilCut(higher.answer(t, &cfg))
					}
					lower.answer(t, &cfg)
					cases = append(cases, detectCase{
						name: fmt.Sprintf("%s/%s-%s-over-%s", format, higher.name, kind, lower.name),
						cfg:  cfg,
						check: func(t *testing.T, res Result, err error) {
							prs := checkOutcome(t, res, err)
							want, ok := lower.zones[format]
							elapsed := res.Elapsed
							if ok {
								if err != nil || res.AZ != want || res.Source != lower.name {
									t.Fatalf("got %q from %q, %v; want %q from %s", res.AZ, res.Source, err, want, lower.name)
								}
							} else {
								var de *DetectError
								if !errors.As(err, &de) || !errors.Is(providerResult(t, prs, lower.name).Err, ErrNoZone) {
									t.Fatalf("got %+v, %v; want a DetectError with %s having no %s zone", res, err, lower.name, format)
								}
								elapsed = de.Elapsed
							}
							wantBudgetCut(t, providerResult(t, prs, higher.name), budget)
							if elapsed < budget || elapsed > budget+budgetSlack {
								t.Errorf("elapsed %v, want the %v budget (and not %v more)", elapsed, budget, budgetSlack)
							}
							if cut != nil {
								<-cut // the silent server saw its request cut
							}
						},
					})
				}
			}
		}
	}
	detectAll(t, cases)
}

// innerRequest marks the request holdAfterAnswer passes to the fake's own
// handler, so that its hook lets it through.
const innerRequest = "X-Azdetect-Test-Inner"

// holdAfterAnswer makes f answer its zone request as usual, but with the
// length set and the connection held until the client closes it, which it
// does once it has read the answer; read is closed then.
func holdAfterAnswer(f zoneFake) (read chan struct{}) {
	read = make(chan struct{})
	*f.wrap = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get(innerRequest) != "" || !f.last(r) {
			return false
		}
		inner := r.Clone(r.Context())
		inner.Header.Set(innerRequest, "1")
		rec := httptest.NewRecorder()
		f.serve(rec, inner)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(read)
		return true
	}
	return read
}

// answerAfter makes f hold its zone request until ready is closed, then
// answer as usual.
func answerAfter(f zoneFake, ready <-chan struct{}) {
	*f.wrap = func(w http.ResponseWriter, r *http.Request) bool {
		if f.last(r) {
			select {
			case <-ready:
			case <-r.Context().Done():
				return true
			}
		}
		return false
	}
}

// Every pair, both formats: the higher-ranked provider answers only after
// the lower one's answer has been read, well within the budget. A valid
// higher answer still wins; a higher provider with no zone in the format
// lets the lower answer win. Nothing waits for the budget.
func TestHigherAnswerWithinBudgetWins(t *testing.T) {
	const budget = time.Minute // a wait for the budget shows as a test timeout
	var cases []detectCase
	for _, format := range []Format{FormatName, FormatID} {
		for hi, higher := range budgetTargets {
			for _, lower := range budgetTargets[hi+1:] {
				cfg := baseConfig(t, higher.name, lower.name)
				cfg.Format, cfg.Timeout = format, budget
				hf := higher.answer(t, &cfg)
				answerAfter(hf, holdAfterAnswer(lower.answer(t, &cfg)))
				cases = append(cases, detectCase{
					name: fmt.Sprintf("%s/%s-late-over-%s", format, higher.name, lower.name),
					cfg:  cfg,
					check: func(t *testing.T, res Result, err error) {
						prs := checkOutcome(t, res, err)
						want, source := higher.zones[format], higher.name
						if want == "" {
							want, source = lower.zones[format], lower.name
						}
						if want == "" {
							if err == nil {
								t.Fatalf("got %q from %q; want no zone in format %s", res.AZ, res.Source, format)
							}
						} else if err != nil || res.AZ != want || res.Source != source {
							t.Fatalf("got %q from %q, %v; want %q from %s", res.AZ, res.Source, err, want, source)
						}
						if p := providerResult(t, prs, lower.name); p.AZ != lower.zones[format] {
							t.Errorf("%s: %+v, want its answer %q recorded", lower.name, p, lower.zones[format])
						}
						if _, ok := higher.zones[format]; !ok && !errors.Is(providerResult(t, prs, higher.name).Err, ErrNoZone) {
							t.Errorf("%s: err = %v, want ErrNoZone", higher.name, providerResult(t, prs, higher.name).Err)
						}
					},
				})
			}
		}
	}
	detectAll(t, cases)
}

// The scene of the report that found the bug: every provider enabled, ECS,
// GCP and Azure accept and never answer, EC2 answers at once, Kubernetes
// runs too; the answer is EC2's, after the budget, in both formats.
func TestBudgetAllProviders(t *testing.T) {
	const budget = 2 * time.Second
	for _, format := range []Format{FormatName, FormatID} {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel()
			hole := newBlackHole(t)
			cfg := baseConfig(t)
			cfg.Format, cfg.Timeout = format, budget
			for _, tg := range budgetTargets {
				switch tg.name {
				case SourceEC2:
					tg.answer(t, &cfg)
				case SourceKubernetes: // below
				default:
					tg.hang(t, &cfg, hole)
				}
			}
			budgetTargets[4].answer(t, &cfg) // kubernetes answers too, ranked below ec2
			res, err := New(cfg).Detect(context.Background())
			prs := checkOutcome(t, res, err)
			if want := budgetTargets[1].zones[format]; err != nil || res.AZ != want || res.Source != SourceEC2 {
				t.Fatalf("got %q from %q, %v; want %q from ec2", res.AZ, res.Source, err, want)
			}
			for _, name := range []string{SourceECS, SourceGCP, SourceAzure} {
				wantBudgetCut(t, providerResult(t, prs, name), budget)
			}
			if p := providerResult(t, prs, SourceKubernetes); p.AZ != budgetTargets[4].zones[format] {
				t.Errorf("kubernetes: %+v, want its answer recorded", p)
			}
			if p := providerResult(t, prs, SourceEnv); !errors.Is(p.Err, ErrNotConfigured) {
				t.Errorf("env: %+v, want not configured", p)
			}
			if res.Elapsed < budget || res.Elapsed > budget+budgetSlack {
				t.Errorf("elapsed %v, want the %v budget", res.Elapsed, budget)
			}
		})
	}
}

// A provider that answers something other than a zone counts as no answer:
// the lower-ranked valid zone wins, and the bad answer is reported as what
// it was, quoting the value.
func TestBadHigherAnswerLosesToLowerZone(t *testing.T) {
	bad := []struct {
		name  string
		reply func(tg hostileTarget) func(http.ResponseWriter, *http.Request) bool
		check func(t *testing.T, err error)
	}{
		{"separator injection", func(tg hostileTarget) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool { fmt.Fprint(w, tg.answer(injection)); return true }
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrInvalidAZ) || !strings.Contains(err.Error(), strconv.Quote(injection)) {
				t.Errorf("err = %v, want ErrInvalidAZ quoting %q", err, injection)
			}
		}},
		{"uppercase zone", func(tg hostileTarget) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool { fmt.Fprint(w, tg.answer("US-EAST-1A")); return true }
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrInvalidAZ) || !strings.Contains(err.Error(), `"US-EAST-1A"`) {
				t.Errorf("err = %v, want ErrInvalidAZ quoting the value", err)
			}
		}},
		{"server error", func(hostileTarget) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(http.StatusInternalServerError)
				return true
			}
		}, func(t *testing.T, err error) {
			if err == nil || !strings.Contains(err.Error(), "HTTP 500") {
				t.Errorf("err = %v, want the 500 named", err)
			}
		}},
	}
	for _, tg := range hostileTargets {
		if tg.name == SourceKubernetes {
			continue // the lowest rank: the valid zone below comes from it
		}
		for _, b := range bad {
			t.Run(tg.name+"/"+b.name, func(t *testing.T) {
				cfg := baseConfig(t, tg.name, SourceKubernetes)
				cfg.Timeout = time.Minute // nothing waits for the budget
				tg.setup(t, &cfg, b.reply(tg))
				budgetTargets[4].answer(t, &cfg)
				res, err := New(cfg).Detect(context.Background())
				prs := checkOutcome(t, res, err)
				if err != nil || res.AZ != "us-east-2a" || res.Source != SourceKubernetes {
					t.Fatalf("got %q from %q, %v; want us-east-2a from kubernetes", res.AZ, res.Source, err)
				}
				p := providerResult(t, prs, tg.name)
				b.check(t, p.Err)
				if errors.Is(p.Err, context.DeadlineExceeded) || errors.Is(p.Err, ErrSuperseded) {
					t.Errorf("%s: err = %v, want the bad answer reported", tg.name, p.Err)
				}
			})
		}
	}
}

// The budget's answer is cached like any other, and Redetect can improve
// it once the higher-ranked provider answers.
func TestBudgetAnswerIsCached(t *testing.T) {
	const budget = time.Second
	cfg := baseConfig(t, SourceECS, SourceEC2)
	cfg.Timeout = budget
	ecs := newFakeECS(t, ecsTask("eu-west-1c"))
	cfg.ECSMetadataURI = ecs.uri()
	var hang atomic.Bool
	hang.Store(true)
	ecs.handlerWrap = func(w http.ResponseWriter, r *http.Request) bool {
		if hang.Load() {
			<-r.Context().Done()
			return true
		}
		return false
	}
	ec2 := newFakeIMDS(t, "eu-west-1a", "euw1-az2")
	cfg.EC2Endpoint = ec2.URL

	d := New(cfg)
	first, err := d.Detect(context.Background())
	checkOutcome(t, first, err)
	if err != nil || first.AZ != "eu-west-1a" || first.Source != SourceEC2 {
		t.Fatalf("got %+v, %v; want eu-west-1a from ec2", first, err)
	}
	wantBudgetCut(t, providerResult(t, first.Providers, SourceECS), budget)
	ecsGets, ec2Gets := ecs.gets.Load(), ec2.gets.Load()
	again, err := d.Detect(context.Background())
	if err != nil || again.AZ != first.AZ || again.Elapsed != first.Elapsed {
		t.Fatalf("second Detect = %+v, %v; want the cached %+v", again, err, first)
	}
	if ecs.gets.Load() != ecsGets || ec2.gets.Load() != ec2Gets {
		t.Error("the cached answer went to the network again")
	}

	hang.Store(false)
	better, err := d.Redetect(context.Background())
	checkOutcome(t, better, err)
	if err != nil || better.AZ != "eu-west-1c" || better.Source != SourceECS {
		t.Fatalf("Redetect = %+v, %v; want eu-west-1c from ecs", better, err)
	}
	if res, _ := d.Detect(context.Background()); res.AZ != "eu-west-1c" {
		t.Errorf("Detect after Redetect = %q, want eu-west-1c", res.AZ)
	}
}

// The caller's ctx ending first acts as a shorter budget: the answer in
// hand is returned and cached, the providers cut report the caller's cause.
func TestCallerContextKeepsAnswerInHand(t *testing.T) {
	cfg := baseConfig(t, SourceECS, SourceGCP)
	cfg.Timeout = time.Minute
	hole := newBlackHole(t)
	budgetTargets[0].hang(t, &cfg, hole)
	gcp := holdAfterAnswer(budgetTargets[2].answer(t, &cfg))
	callerGaveUp := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		select {
		case <-gcp: // the GCP answer has been read
			cancel(callerGaveUp)
		case <-ctx.Done():
		}
	}()

	d := New(cfg)
	res, err := d.Detect(ctx)
	prs := checkOutcome(t, res, err)
	if err != nil || res.AZ != "us-central1-f" || res.Source != SourceGCP {
		t.Fatalf("got %q from %q, %v; want us-central1-f from gcp", res.AZ, res.Source, err)
	}
	if p := providerResult(t, prs, SourceECS); !errors.Is(p.Err, callerGaveUp) {
		t.Errorf("ecs: err = %v, want the caller's cause", p.Err)
	}
	accepted := hole.accepted.Load()
	if cached, err := d.Detect(context.Background()); err != nil || cached.AZ != res.AZ || cached.Elapsed != res.Elapsed {
		t.Errorf("second Detect = %+v, %v; want the cached answer", cached, err)
	}
	if hole.accepted.Load() != accepted {
		t.Error("the cached answer went to the network again")
	}
}

// A transport timeout as long as the budget may fire a moment before the
// budget's own timer; the provider still reports the budget, not the
// transport's wording.
func TestTransportTimeoutAtBudgetReportsBudget(t *testing.T) {
	const budget = 200 * time.Millisecond
	cfg := baseConfig(t, SourceAzure)
	cfg.Timeout = budget
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		dl, ok := r.Context().Deadline()
		if !ok {
			return nil, errors.New("request without the budget's deadline")
		}
		// Return exactly at the deadline, as a transport timer would,
		// without waiting for the context to end.
		time.Sleep(time.Until(dl) - time.Millisecond)
		for time.Now().Before(dl) {
		}
		return nil, errors.New("net/http: timeout awaiting response headers")
	})}
	for range 5 {
		_, err := New(cfg).Detect(context.Background())
		prs := checkOutcome(t, Result{}, err)
		wantBudgetCut(t, providerResult(t, prs, SourceAzure), budget)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An answer that comes in as the budget ends is judged on its own: a valid
// zone is the answer, an invalid one is reported as invalid, not as cut.
// The transport here answers only once the request's context has ended, as
// a server whose answer crosses the budget's end would.
func TestAnswerArrivingAsBudgetEnds(t *testing.T) {
	for _, tt := range []struct {
		zone  string
		check func(t *testing.T, res Result, err error)
	}{
		{"eu-west-1c", func(t *testing.T, res Result, err error) {
			if err != nil || res.AZ != "eu-west-1c" || res.Source != SourceECS {
				t.Errorf("got %q from %q, %v; want eu-west-1c from ecs", res.AZ, res.Source, err)
			}
		}},
		{"EU-WEST-1C", func(t *testing.T, res Result, err error) {
			var de *DetectError
			if !errors.As(err, &de) || !errors.Is(de.Providers[0].Err, ErrInvalidAZ) ||
				!strings.Contains(de.Providers[0].Err.Error(), `"EU-WEST-1C"`) {
				t.Errorf("err = %v, want ErrInvalidAZ quoting the value", err)
			}
		}},
	} {
		t.Run(tt.zone, func(t *testing.T) {
			cfg := baseConfig(t, SourceECS)
			cfg.Timeout = 100 * time.Millisecond
			cfg.ECSMetadataURI = "http://127.0.0.1:9/v4/x" // never dialed: the transport answers
			cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				<-r.Context().Done()
				rec := httptest.NewRecorder()
				rec.WriteString(ecsTask(tt.zone))
				return rec.Result(), nil
			})}
			res, err := New(cfg).Detect(context.Background())
			checkOutcome(t, res, err)
			tt.check(t, res, err)
		})
	}
}
