package iq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/azkafka/azkafka/azdetect"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestNewClientConfig(t *testing.T) {
	snap, _ := newSnapshot(threeHosts())
	tests := []struct {
		name      string
		env       map[string]string
		opts      []Option
		standby   bool
		maxLag    int64
		errSubstr string
	}{
		{"defaults", nil, nil, false, 10000, ""},
		{"env", map[string]string{envAllowStandby: "true", envMaxLag: " 42 "}, nil, true, 42, ""},
		{"options win", map[string]string{envAllowStandby: "true", envMaxLag: "42"}, []Option{WithAllowStandby(false), WithMaxLag(7)}, false, 7, ""},
		{"blank allow standby", map[string]string{envAllowStandby: ""}, nil, false, 0, "iq: AZKAFKA_IQ_ALLOW_STANDBY is set but blank"},
		{"blank max lag", map[string]string{envMaxLag: " "}, nil, false, 0, "iq: AZKAFKA_IQ_MAX_LAG is set but blank"},
		{"blank but overridden", map[string]string{envAllowStandby: "", envMaxLag: " "}, []Option{WithAllowStandby(true), WithMaxLag(3)}, false, 0, "iq: AZKAFKA_IQ_ALLOW_STANDBY is set but blank"},
		{"bad bool", map[string]string{envAllowStandby: "yes please"}, nil, false, 0, `iq: AZKAFKA_IQ_ALLOW_STANDBY="yes please": want true or false (any case)`},
		{"bad lag", map[string]string{envMaxLag: "abc"}, nil, false, 0, `AZKAFKA_IQ_MAX_LAG="abc": not a non-negative integer`},
		{"negative lag", map[string]string{envMaxLag: "-1"}, nil, false, 0, `AZKAFKA_IQ_MAX_LAG="-1"`},
		{"long value truncated", map[string]string{envMaxLag: strings.Repeat("9", 100)}, nil, false, 0, `"` + strings.Repeat("9", 64) + `"...`},
		{"bad option", nil, []Option{WithMaxAttempts(0)}, false, 0, "WithMaxAttempts(0)"},
		{"negative option", nil, []Option{WithMaxLag(-5)}, false, 0, "WithMaxLag(-5)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(sourceOf(snap), append([]Option{WithLookupEnv(envMap(tt.env)), WithAZ("az1")}, tt.opts...)...)
			if tt.errSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSubstr) {
					t.Fatalf("err = %v, want it to contain %s", err, tt.errSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.allowStandby != tt.standby || c.maxLag != tt.maxLag {
				t.Errorf("standby %v maxLag %d, want %v %d", c.allowStandby, c.maxLag, tt.standby, tt.maxLag)
			}
		})
	}
}

// policyModel: partition 0 (key KH01) active on a (az1, lag 0, or 50,000 when
// restoring) and standbys b (az1, lag 5), c (az2, lag 3), d (az1, lag
// 20,000), e (az2, lag unknown), f (az2, lag 10,000).
func policyModel(activeLag int64) Metadata {
	in := func(h, az string, active bool, lag int64, known bool) Instance {
		i := Instance{HostInfo: HostInfo{h, 1}, AZ: az}
		if active {
			i.ActiveStores, i.ActivePartitions = []string{"s"}, tp("t", 0)
		} else {
			i.StandbyStores, i.StandbyPartitions = []string{"s"}, tp("t", 0)
		}
		if known {
			i.Lags = map[string]map[int]Lag{"s": {0: {Lag: lag}}}
		}
		return i
	}
	return Metadata{
		StoreSourceTopics: map[string][]string{"s": {"t"}},
		TopicPartitions:   map[string]int{"t": 1},
		Instances: []Instance{
			in("a", "az1", true, activeLag, true),
			in("b", "az1", false, 5, true),
			in("c", "az2", false, 3, true),
			in("d", "az1", false, 20000, true),
			in("e", "az2", false, 0, false),
			in("f", "az2", false, 10000, true),
		},
	}
}

// firstIndex is an injected random source that always picks index 0, so a
// Fisher-Yates shuffle turns [x y] into [y x] and [x y z] into [y z x].
func firstIndex(int) int { return 0 }

func TestCandidates(t *testing.T) {
	tests := []struct {
		name      string
		activeLag int64
		opts      []Option
		want      []string
		err       error
	}{
		{"active only by default", 0, nil, []string{"a:1"}, nil},
		{"active only even when restoring", 50000, nil, []string{"a:1"}, nil},
		{"standby: active, local, remote", 0, []Option{WithAllowStandby(true), WithAZ("az1")}, []string{"a:1", "b:1", "f:1", "c:1"}, nil},
		{"standby: other zone first", 0, []Option{WithAllowStandby(true), WithAZ("az2")}, []string{"a:1", "f:1", "c:1", "b:1"}, nil},
		{"standby: restoring active skipped", 50000, []Option{WithAllowStandby(true), WithAZ("az1")}, []string{"b:1", "f:1", "c:1"}, nil},
		{"standby: no zone, all equal", 0, []Option{WithAllowStandby(true), WithAZ("")}, []string{"a:1", "c:1", "f:1", "b:1"}, nil},
		{"max lag 4", 0, []Option{WithAllowStandby(true), WithAZ("az1"), WithMaxLag(4)}, []string{"a:1", "c:1"}, nil},
		{"nothing eligible", 50000, []Option{WithAllowStandby(true), WithAZ("az1"), WithMaxLag(2)}, nil, ErrNoReplica},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := newSnapshot(policyModel(tt.activeLag))
			if err != nil {
				t.Fatal(err)
			}
			opts := append([]Option{WithLookupEnv(noEnv), withRandom(firstIndex), WithAZ("az1")}, tt.opts...)
			c, err := NewClient(sourceOf(snap), opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, got, err := c.Candidates(context.Background(), "s", []byte("KH01"), nil)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if !slices.Equal(hosts(got), tt.want) {
				t.Errorf("order = %v, want %v", hosts(got), tt.want)
			}
			if tt.err != nil && !strings.Contains(err.Error(), "standby e:1 lag unknown") {
				t.Errorf("error %q does not explain the unknown lag", err)
			}
		})
	}
}

func TestCandidatesRandomAmongEquals(t *testing.T) {
	snap, _ := newSnapshot(policyModel(0))
	seen := map[string]bool{}
	for i := range 50 {
		seq := i
		c, _ := NewClient(sourceOf(snap), WithLookupEnv(noEnv), WithAllowStandby(true), WithAZ("az2"),
			withRandom(func(n int) int { seq = seq*7 + 3; return seq % n }))
		_, got, _ := c.Candidates(context.Background(), "s", []byte("KH01"), nil)
		if got[0].Host != "a" || got[3].Host != "b" {
			t.Fatalf("order %v breaks active-first or zone preference", hosts(got))
		}
		seen[got[1].Host+got[2].Host] = true
	}
	if !seen["cf"] || !seen["fc"] {
		t.Errorf("the two same-zone standbys were never swapped: %v", seen)
	}
}

func TestCallerAZFromDetection(t *testing.T) {
	snap, _ := newSnapshot(policyModel(0))
	calls := 0
	c, _ := NewClient(sourceOf(snap), WithLookupEnv(noEnv), WithAllowStandby(true), withRandom(firstIndex))
	c.azDetect = func(context.Context) (azdetect.Result, error) { calls++; return azdetect.Result{AZ: "az2"}, nil }
	for range 3 {
		_, got, _ := c.Candidates(context.Background(), "s", []byte("KH01"), nil)
		if !slices.Equal(hosts(got), []string{"a:1", "f:1", "c:1", "b:1"}) {
			t.Fatalf("order %v, want az2 standbys first", hosts(got))
		}
	}
	if calls != 1 {
		t.Errorf("detection ran %d times, want once", calls)
	}
	c2, _ := NewClient(sourceOf(snap), WithLookupEnv(noEnv), WithAllowStandby(true), withRandom(firstIndex),
		WithLogger(slog.New(slog.DiscardHandler)))
	c2.azDetect = func(context.Context) (azdetect.Result, error) { return azdetect.Result{}, azdetect.ErrNoAZ }
	if _, got, _ := c2.Candidates(context.Background(), "s", []byte("KH01"), nil); len(got) != 4 {
		t.Errorf("failed detection: %v, want all 4 eligible replicas", hosts(got))
	}
}

// replicaServer is one fake Streams instance; its behaviour is a real fault.
type replicaServer struct {
	name string
	addr HostInfo
}

func startReplicas(t *testing.T, kinds ...string) []replicaServer {
	t.Helper()
	var out []replicaServer
	for _, kind := range kinds {
		var addr string
		switch kind {
		case "refused": // a port nobody listens on
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr = l.Addr().String()
			l.Close()
		case "reset": // accepts, then closes with RST
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
				}
			}()
			addr = l.Addr().String()
		default:
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch kind {
				case "ok":
					w.Write([]byte("42"))
				case "503":
					http.Error(w, "overloaded", http.StatusServiceUnavailable)
				case "not-active":
					http.Error(w, `{"error":"not_active"}`, http.StatusServiceUnavailable)
				case "404":
					http.Error(w, "no such key", http.StatusNotFound)
				case "hang":
					<-r.Context().Done()
				}
			}))
			t.Cleanup(srv.Close)
			addr = srv.Listener.Addr().String()
		}
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		out = append(out, replicaServer{kind, HostInfo{host, p}})
	}
	return out
}

// httpQuery is a QueryFunc the way a user writes one.
func httpQuery(got *string) QueryFunc {
	return func(ctx context.Context, r Replica) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.HostInfo.String()+"/store/s/k", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		body := strings.TrimSpace(string(raw))
		if strings.Contains(body, "not_active") {
			return ErrNotActive
		}
		if resp.StatusCode != http.StatusOK {
			return &StatusError{Code: resp.StatusCode, Body: body}
		}
		*got = body
		return nil
	}
}

func queryModel(reps []replicaServer) Metadata {
	md := Metadata{StoreSourceTopics: map[string][]string{"s": {"t"}}, TopicPartitions: map[string]int{"t": 1}}
	for i, r := range reps {
		in := Instance{HostInfo: r.addr, Lags: map[string]map[int]Lag{"s": {0: {}}}}
		if i == 0 {
			in.ActiveStores, in.ActivePartitions = []string{"s"}, tp("t", 0)
		} else {
			in.StandbyStores, in.StandbyPartitions = []string{"s"}, tp("t", 0)
		}
		md.Instances = append(md.Instances, in)
	}
	return md
}

func TestQueryFailover(t *testing.T) {
	tests := []struct {
		name      string
		replicas  []string
		opts      []Option
		wantValue string
		wantTried int
		wantIs    []error
		wantText  []string
	}{
		{"active answers", []string{"ok", "503"}, nil, "42", 0, nil, nil},
		{"refused then standby", []string{"refused", "ok"}, nil, "42", 0, nil, nil},
		{"reset, 503, not active, then ok", []string{"reset", "503", "not-active", "ok"}, []Option{WithMaxAttempts(4)}, "42", 0, nil, nil},
		// The attempt timeout also bounds the answering replica's
		// request: 1s leaves a loaded machine room to answer.
		{"hang times out then ok", []string{"hang", "ok"}, []Option{WithAttemptTimeout(time.Second)}, "42", 0, nil, nil},
		{"404 is final", []string{"404", "ok"}, nil, "", 1, nil, []string{"HTTP 404"}},
		{"all fail", []string{"refused", "503", "not-active"}, nil, "", 3, []error{syscall.ECONNREFUSED, ErrNotActive},
			[]string{"after 3 attempt(s)", "[active ", "connection refused", "HTTP 503 Service Unavailable: overloaded", "not active"}},
		{"attempts bounded", []string{"503", "503", "503", "503"}, []Option{WithMaxAttempts(2)}, "", 2, nil, []string{"gave up after 2 attempts"}},
		{"active only does not fail over", []string{"refused", "ok"}, []Option{WithAllowStandby(false)}, "", 1, []error{syscall.ECONNREFUSED}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reps := startReplicas(t, tt.replicas...)
			snap, err := newSnapshot(queryModel(reps))
			if err != nil {
				t.Fatal(err)
			}
			// The rand source always picks the last index, which leaves a
			// Fisher-Yates shuffle unchanged: active, then standbys by port.
			opts := append([]Option{WithLookupEnv(noEnv), WithAZ(""), WithAllowStandby(true),
				withRandom(func(n int) int { return n - 1 })}, tt.opts...)
			c, err := NewClient(sourceOf(snap), opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			err = c.Query(context.Background(), "s", []byte("KH01"), httpQuery(&got))
			if tt.wantValue != "" {
				if err != nil || got != tt.wantValue {
					t.Fatalf("Query = %q, %v; want %q", got, err, tt.wantValue)
				}
				return
			}
			var qe *QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("err = %v (%T), want *QueryError", err, err)
			}
			if len(qe.Attempts) != tt.wantTried {
				t.Errorf("tried %d replicas, want %d: %v", len(qe.Attempts), tt.wantTried, err)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			for _, a := range qe.Attempts {
				if !strings.Contains(err.Error(), a.Replica.HostInfo.String()) {
					t.Errorf("error %q does not name host %s", err, a.Replica.HostInfo)
				}
			}
		})
	}
}

func TestQueryStopsWithContext(t *testing.T) {
	reps := startReplicas(t, "hang", "hang", "hang")
	snap, _ := newSnapshot(queryModel(reps))
	c, _ := NewClient(sourceOf(snap), WithLookupEnv(noEnv), WithAZ(""), WithAllowStandby(true), WithAttemptTimeout(0))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	var got string
	err := c.Query(ctx, "s", []byte("KH01"), httpQuery(&got))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Query took %s after its context ended", d)
	}
}

func TestQueryNotAvailable(t *testing.T) {
	c, _ := NewClient(&Source{impl: &fakeSource{}}, WithLookupEnv(noEnv), WithAZ(""))
	err := c.Query(context.Background(), "s", []byte("k"), func(context.Context, Replica) error {
		t.Fatal("fn called without metadata")
		return nil
	})
	if !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestIsRetriable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{ErrNotActive, true},
		{&StatusError{Code: 500}, true},
		{&StatusError{Code: 429}, true},
		{&StatusError{Code: 400}, false},
		{syscall.ECONNREFUSED, true},
		{context.DeadlineExceeded, true},
		{errors.New("bad key"), false},
	}
	for _, tt := range tests {
		if got := isRetriable(tt.err); got != tt.want {
			t.Errorf("isRetriable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// moved returns threeHosts with the active partitions of instance from
// given to instance to.
func moved(from, to int) Metadata {
	md := threeHosts()
	md.Instances[to].ActivePartitions = append(md.Instances[to].ActivePartitions, md.Instances[from].ActivePartitions...)
	md.Instances[from].ActivePartitions = nil
	return md
}

func TestQueryRereadsMetadataWhenNoCopyIsActive(t *testing.T) {
	before, _ := newSnapshot(threeHosts())
	key := []byte("alice")
	r, err := before.Route("counts", key)
	if err != nil {
		t.Fatal(err)
	}
	oldHost := r.Active.HostInfo
	from, to := -1, -1
	for i, in := range threeHosts().Instances {
		if in.HostInfo == oldHost {
			from = i
		} else if to < 0 {
			to = i
		}
	}
	after, _ := newSnapshot(moved(from, to))
	newHost := threeHosts().Instances[to].HostInfo

	// The old owner says not active; the re-read names the new one.
	src := &fakeSource{snaps: []*snapshot{before, after}}
	c, err := NewClient(&Source{impl: src}, WithLookupEnv(noEnv), WithAZ(""), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	var asked []HostInfo
	err = c.Query(context.Background(), "counts", key, func(_ context.Context, r Replica) error {
		asked = append(asked, r.HostInfo)
		if r.HostInfo != newHost {
			return fmt.Errorf("HTTP 503: %w", ErrNotActive)
		}
		return nil
	})
	if err != nil || src.refreshes != 1 || !slices.Equal(asked, []HostInfo{oldHost, newHost}) {
		t.Fatalf("err %v, refreshes %d, asked %v; want nil, 1, [%s %s]", err, src.refreshes, asked, oldHost, newHost)
	}

	// The re-read names the same owner: one re-read, a precise error.
	src = &fakeSource{snaps: []*snapshot{before}}
	c, _ = NewClient(&Source{impl: src}, WithLookupEnv(noEnv), WithAZ(""), WithLogger(quietLogger()))
	asked = nil
	err = c.Query(context.Background(), "counts", key, func(_ context.Context, r Replica) error {
		asked = append(asked, r.HostInfo)
		return fmt.Errorf("HTTP 503: %w", ErrNotActive)
	})
	if err == nil || !errors.Is(err, ErrNotActive) || src.refreshes != 1 || len(asked) != 1 ||
		!strings.Contains(err.Error(), "the re-read metadata names no other") {
		t.Fatalf("err %v, refreshes %d, asked %v", err, src.refreshes, asked)
	}

	// Another failure (a refused connection) is not a hand-over: no re-read.
	src = &fakeSource{snaps: []*snapshot{before, after}}
	c, _ = NewClient(&Source{impl: src}, WithLookupEnv(noEnv), WithAZ(""), WithLogger(quietLogger()))
	err = c.Query(context.Background(), "counts", key, func(context.Context, Replica) error { return syscall.ECONNREFUSED })
	if err == nil || src.refreshes != 0 {
		t.Fatalf("refused: err %v, refreshes %d", err, src.refreshes)
	}
}
