package iq

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fakeApp is a Kafka Streams application of n instances, each an HTTP
// server that serves its own metadata document.
type fakeApp struct {
	mu      sync.Mutex
	servers []*httptest.Server
	hosts   []HostInfo
	state   []string
	body    []func() string // overrides, nil = normal document
	hits    []atomic.Int64
}

func newFakeApp(t *testing.T, n int) *fakeApp {
	t.Helper()
	a := &fakeApp{state: make([]string, n), body: make([]func() string, n), hits: make([]atomic.Int64, n)}
	for i := range n {
		a.state[i] = "RUNNING"
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.hits[i].Add(1)
			if r.URL.Path != "/azkafka/iq/metadata" {
				http.NotFound(w, r)
				return
			}
			a.mu.Lock()
			f := a.body[i]
			a.mu.Unlock()
			if f != nil {
				body := f()
				if body == resetMidBody {
					// Promise a long body, send a little, then reset the connection.
					w.Header().Set("Content-Length", "5000")
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, `{"version":1,"self":`)
					w.(http.Flusher).Flush()
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.(*net.TCPConn).SetLinger(0)
						conn.Close()
					}
					return
				}
				io.WriteString(w, body)
				return
			}
			io.WriteString(w, a.doc(i))
		}))
		t.Cleanup(srv.Close)
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		a.servers = append(a.servers, srv)
		a.hosts = append(a.hosts, HostInfo{host, p})
	}
	return a
}

// doc: instance i is active for partition i of "in" (n partitions) and
// standby for partition i+1; its own lag on its standby is 100*(i+1).
func (a *fakeApp) doc(i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.hosts)
	var insts []string
	for j, h := range a.hosts {
		insts = append(insts, fmt.Sprintf(`{"host":%q,"port":%d,"activeStores":["counts"],"activePartitions":{"in":[%d]},"standbyStores":["counts"],"standbyPartitions":{"in":[%d]}}`,
			h.Host, h.Port, j, (j+1)%n))
	}
	return fmt.Sprintf(`{"version":1,"self":{"host":%q,"port":%d},"az":"az%d","state":%q,"stores":{"counts":["in"]},"topics":{"in":%d},"instances":[%s],"lags":{"counts":{"%d":{"current":0,"end":0,"lag":0},"%d":{"current":1,"end":%d,"lag":%d}}}}`,
		a.hosts[i].Host, a.hosts[i].Port, i, a.state[i], n, strings.Join(insts, ","), i, (i+1)%n, 1+100*(i+1), 100*(i+1))
}

// resetMidBody as a body override makes the instance reset the connection
// in the middle of its answer.
const resetMidBody = "\x00reset"

func (a *fakeApp) url(i int) string { return a.servers[i].URL + "/azkafka/iq/metadata" }

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// standbyLags returns, for each partition, the standby's known lag or -1.
func standbyLags(t *testing.T, s *snapshot, n int) []int64 {
	t.Helper()
	var out []int64
	for p := range n {
		r := s.stores["counts"].routes[p]
		if len(r.Standbys) != 1 {
			t.Fatalf("partition %d: %d standbys", p, len(r.Standbys))
		}
		if r.Standbys[0].LagKnown {
			out = append(out, r.Standbys[0].Lag.Lag)
		} else {
			out = append(out, -1)
		}
	}
	return out
}

func TestHTTPSourceDiscoversPeersForLags(t *testing.T) {
	app := newFakeApp(t, 3)
	src, err := NewHTTPSource([]string{app.url(0)}, WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.snapshot() != nil {
		t.Fatal("snapshot before first poll")
	}
	ctx := context.Background()
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// Only the seed answered: only its own standby lag (partition 1) is known.
	if got := fmt.Sprint(standbyLags(t, src.snapshot(), 3)); got != "[-1 100 -1]" {
		t.Errorf("after first poll lags = %s, want [-1 100 -1]", got)
	}
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// Partition p's standby is instance p-1, whose lag is 100*p (p-1+1).
	if got := fmt.Sprint(standbyLags(t, src.snapshot(), 3)); got != "[300 100 200]" {
		t.Errorf("after discovery lags = %s, want [300 100 200]", got)
	}
	r, _ := src.snapshot().Route("counts", []byte("KH07")) // partition 2 of 3
	if r.Active.HostInfo != app.hosts[2] || r.Active.AZ != "az2" {
		t.Errorf("active = %+v, want %s in az2", r.Active, app.hosts[2])
	}
	for i := range 3 {
		if app.hits[i].Load() == 0 {
			t.Errorf("instance %d never polled", i)
		}
	}
}

func TestHTTPSourceWithoutDiscoveryPollsSeedsOnly(t *testing.T) {
	app := newFakeApp(t, 3)
	src, _ := NewHTTPSource([]string{app.url(1)}, withPeerDiscovery(false), WithLogger(quietLogger()))
	defer src.Close()
	for range 2 {
		if err := src.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if app.hits[0].Load() != 0 || app.hits[2].Load() != 0 || app.hits[1].Load() != 2 {
		t.Errorf("hits = %d %d %d, want 0 2 0", app.hits[0].Load(), app.hits[1].Load(), app.hits[2].Load())
	}
}

func TestHTTPSourcePrefersRunningSeed(t *testing.T) {
	app := newFakeApp(t, 2)
	app.state[0] = "REBALANCING"
	app.body[0] = func() string { // a stale view: nobody active
		return fmt.Sprintf(`{"version":1,"self":{"host":%q,"port":%d},"state":"REBALANCING","stores":{"counts":["in"]},"topics":{"in":2},"instances":[]}`,
			app.hosts[0].Host, app.hosts[0].Port)
	}
	src, _ := NewHTTPSource([]string{app.url(0), app.url(1)}, WithLogger(quietLogger()))
	defer src.Close()
	if err := src.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := src.snapshot().Route("counts", []byte("KH01")); err != nil {
		t.Fatalf("route from the RUNNING seed's view: %v", err)
	}
}

func TestHTTPSourceKeepsLastGoodMetadata(t *testing.T) {
	huge := `{"version":1,"pad":"` + strings.Repeat("x", 2000) + `"}`
	tests := []struct {
		name string
		body string
		kill bool
		want []string
	}{
		{"invalid document", `{"version":1,"self":{"host":"h","port":1},"state":"RUNNING","topics":{"in":-4}}`, false, []string{"/azkafka/iq/metadata", `field topics["in"]`}},
		{"too large", huge, false, []string{"/azkafka/iq/metadata", "larger than 1024 bytes"}},
		{"not JSON", "<html>oops</html>", false, []string{"invalid metadata JSON"}},
		{"dead instance", "", true, []string{"connection refused"}},
		{"reset mid-body", resetMidBody, false, []string{"reading body", "/azkafka/iq/metadata"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := newFakeApp(t, 1)
			src, _ := NewHTTPSource([]string{app.url(0)}, WithMaxBodyBytes(1024), WithLogger(quietLogger()))
			defer src.Close()
			if err := src.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			good := src.snapshot()
			if tt.kill {
				app.servers[0].Close()
			} else {
				app.body[0] = func() string { return tt.body }
			}
			err := src.Refresh(context.Background())
			if err == nil {
				t.Fatal("bad poll accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want %q", err, w)
				}
			}
			if src.snapshot() != good {
				t.Error("last good metadata dropped")
			}
			if ok, last := src.LastPoll(); last == nil || ok.IsZero() {
				t.Errorf("LastPoll = %v, %v", ok, last)
			}
		})
	}
}

func TestHTTPSourceHangingInstanceIsBounded(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	src, _ := NewHTTPSource([]string{srv.URL + "/m"}, WithPollTimeout(100*time.Millisecond), WithLogger(quietLogger()))
	defer src.Close()
	start := time.Now()
	err := src.Refresh(context.Background())
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/m") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("poll took %s with a 100ms timeout", d)
	}
}

func TestHTTPSourceStartCloseNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	app := newFakeApp(t, 2)
	// Requests are counted as the source starts them: a request sent
	// before Close can reach the server after Close returned, so the
	// server's count cannot tell polling after Close from one in flight.
	tr := &http.Transport{}
	var started atomic.Int64
	client := &http.Client{Transport: countingTransport{tr, &started}}
	src, err := NewHTTPSource([]string{app.url(0)}, WithPollInterval(10*time.Millisecond), WithLogger(quietLogger()),
		WithHTTPClient(client))
	if err != nil {
		t.Fatal(err)
	}
	src.Start()
	src.Start()
	deadline := time.Now().Add(5 * time.Second)
	for app.hits[1].Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if app.hits[1].Load() < 3 {
		t.Fatalf("peer polled %d times in 5s at a 10ms interval", app.hits[1].Load())
	}
	src.Close()
	src.Close()
	n := started.Load()
	time.Sleep(50 * time.Millisecond) // five poll intervals
	if started.Load() != n {
		t.Error("still polling after Close")
	}
	tr.CloseIdleConnections()
	for _, s := range app.servers {
		s.Close()
	}
}

// countingTransport counts the requests started through it.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func TestNewHTTPSourceErrors(t *testing.T) {
	tests := []struct {
		urls []string
		opts []Option
		want string
	}{
		{nil, nil, "no metadata URL"},
		{[]string{"ftp://h/x"}, nil, `metadata URL "ftp://h/x"`},
		{[]string{"http:///path"}, nil, `metadata URL "http:///path"`},
		{[]string{"http://h:1/m"}, []Option{WithPollInterval(0)}, "must be positive"},
	}
	for _, tt := range tests {
		if _, err := NewHTTPSource(tt.urls, tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewHTTPSource(%v) err = %v, want %q", tt.urls, err, tt.want)
		}
	}
	src, _ := NewHTTPSource([]string{"http://127.0.0.1:1/m"})
	if err := src.Close(); err != nil { // never started
		t.Fatal(err)
	}
}
