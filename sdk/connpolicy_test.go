package sdk

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/azkafka/azkafka/retry"
	"golang.org/x/time/rate"
)

// fakeClock is a virtual clock: sleep advances it at once.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) clock() clock {
	return clock{
		now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t },
		sleep: func(ctx context.Context, d time.Duration) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.sleeps = append(f.sleeps, d)
			f.t = f.t.Add(d)
			return nil
		},
	}
}

func (f *fakeClock) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }

func (f *fakeClock) takeSleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sleeps
	f.sleeps = nil
	return s
}

// testPolicy returns a policy on a virtual clock whose jitter always picks
// the top of the window, so delays equal (almost) the ceilings.
func testPolicy(fc *fakeClock, l *rate.Limiter) *connPolicy {
	return &connPolicy{
		limiter: l,
		backoff: retry.Backoff{Min: 50 * time.Millisecond, Max: time.Second, Rand: func() float64 { return 0.999 }},
		clock:   fc.clock(),
	}
}

// server is a loopback listener; each accepted connection is handled by
// the current handler.
type server struct {
	addr    string
	mu      sync.Mutex
	handler func(net.Conn)
}

func startServer(t *testing.T) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String(), handler: func(c net.Conn) { c.Close() }}
	var wg sync.WaitGroup
	var conns []net.Conn
	closed := false
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close() // unblocks handlers waiting on Read
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			if closed {
				// Accepted while the cleanup ran: no handler may start
				// on a connection that nobody will close.
				s.mu.Unlock()
				c.Close()
				return
			}
			h := s.handler
			conns = append(conns, c)
			s.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); h(c) }()
		}
	}()
	return s
}

func (s *server) handle(h func(net.Conn)) { s.mu.Lock(); s.handler = h; s.mu.Unlock() }

// answerThenClose answers one request and closes: a connection that served.
func answerThenClose(c net.Conn) {
	buf := make([]byte, 64)
	if _, err := c.Read(buf); err == nil {
		c.Write([]byte("response"))
	}
	c.Read(buf) // until the client closes or the test ends
	c.Close()
}

// closeWithoutAnswer reads the request and closes: what a broker throttling
// connection creation (KIP-612) or a dying agent does.
func closeWithoutAnswer(c net.Conn) {
	c.Read(make([]byte, 64))
	c.Close()
}

var netDial = (&net.Dialer{Timeout: 2 * time.Second}).DialContext

// exchange sends a request and reads the answer until EOF or error.
func exchange(t *testing.T, c net.Conn) (answered bool, err error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("request")); err != nil {
		return false, err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return n > 0, err
}

func TestPolicyBacksOffEarlyClosesAndResetsAfterServing(t *testing.T) {
	srv := startServer(t)
	fc := newFakeClock()
	p := testPolicy(fc, nil)
	dial := p.wrap(netDial, false)
	ctx := context.Background()

	// Four connections closed before answering: each re-dial waits longer.
	srv.handle(closeWithoutAnswer)
	var waits []time.Duration
	for i := 0; i < 5; i++ {
		c, err := dial(ctx, "tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, fc.takeSleeps()...)
		if answered, err := exchange(t, c); answered || !errors.Is(err, io.EOF) {
			t.Fatalf("dial %d: answered %v err %v, want io.EOF before any answer", i, answered, err)
		}
		c.Close()
	}
	ceilings := []time.Duration{50, 100, 200, 400} // ms, the first dial waits nothing
	if len(waits) != len(ceilings) {
		t.Fatalf("waits %v, want %d of them", waits, len(ceilings))
	}
	for i, w := range waits {
		c := ceilings[i] * time.Millisecond
		if w >= c || w < c*99/100 {
			t.Errorf("wait %d = %v, want just under %v", i, w, c)
		}
	}
	st := p.stats.snapshot()
	if st.EarlyCloses != 5 || st.PeerCloses != 5 || st.ConnectionsCreated != 5 || st.Dials != 5 || st.DialFailures != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.BackoffWait != 750*time.Millisecond*999/1000 || st.ThrottledTime != st.BackoffWait {
		t.Errorf("backoff wait %v, throttled %v", st.BackoffWait, st.ThrottledTime)
	}

	// One connection that serves a request resets the backoff ...
	srv.handle(answerThenClose)
	c, err := dial(ctx, "tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if w := fc.takeSleeps(); len(w) != 1 || w[0] < 790*time.Millisecond {
		t.Fatalf("sixth dial waited %v, want ~800ms", w)
	}
	if answered, err := exchange(t, c); !answered || err != nil {
		t.Fatalf("answered %v err %v", answered, err)
	}
	c.Close() // closed by us: no delay for the next dial
	if _, err := dial(ctx, "tcp", srv.addr); err != nil {
		t.Fatal(err)
	}
	if w := fc.takeSleeps(); len(w) != 0 {
		t.Fatalf("dial after a served connection waited %v", w)
	}
}

func TestPolicyPeerCloseOfHealthyConnectionJittersOnce(t *testing.T) {
	srv := startServer(t)
	srv.handle(func(c net.Conn) {
		buf := make([]byte, 64)
		c.Read(buf)
		c.Write([]byte("response"))
		c.Read(buf) // second request: closed by the peer, as an agent balancing zones does
		c.Close()
	})
	fc := newFakeClock()
	p := testPolicy(fc, nil)
	dial := p.wrap(netDial, false)
	c, err := dial(context.Background(), "tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if answered, err := exchange(t, c); !answered || err != nil {
		t.Fatalf("first exchange: %v %v", answered, err)
	}
	if _, err := exchange(t, c); !errors.Is(err, io.EOF) {
		t.Fatalf("second exchange err %v, want io.EOF", err)
	}
	c.Close()
	for i, want := range []int{1, 0} { // one short wait, then none
		if _, err := dial(context.Background(), "tcp", srv.addr); err != nil {
			t.Fatal(err)
		}
		w := fc.takeSleeps()
		if len(w) != want || want == 1 && w[0] >= 50*time.Millisecond {
			t.Fatalf("dial %d after the peer close waited %v, want %d wait(s) under 50ms", i, w, want)
		}
	}
	if st := p.stats.snapshot(); st.PeerCloses != 1 || st.EarlyCloses != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPolicyDialFailuresBackOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // now refuses
	fc := newFakeClock()
	p := testPolicy(fc, nil)
	dial := p.wrap(netDial, false)
	for i := 0; i < 8; i++ {
		_, err := dial(context.Background(), "tcp", addr)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %d: %v, want ECONNREFUSED unwrapped by the policy", i, err)
		}
	}
	w := fc.takeSleeps()
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	if len(w) != len(want) {
		t.Fatalf("waits %v", w)
	}
	for i := range w {
		if c := want[i] * time.Millisecond; w[i] >= c || w[i] < c*99/100 {
			t.Errorf("wait %d = %v, want just under %v", i, w[i], c)
		}
	}
	if st := p.stats.snapshot(); st.DialFailures != 8 || st.ConnectionsCreated != 0 || st.Dials != 8 {
		t.Fatalf("stats %+v", st)
	}
}

// A re-dial's delay runs from the failure that earned it: an address that
// failed long ago (a broker killed and restarted, which the client had no
// partition to dial for since) is dialed at once; one that just failed
// still waits.
func TestPolicyBackoffRunsFromTheLastFailure(t *testing.T) {
	srv := startServer(t)
	srv.handle(answerThenClose)
	fc := newFakeClock()
	p := testPolicy(fc, nil)
	var down atomic.Bool
	down.Store(true)
	dial := p.wrap(func(ctx context.Context, network, address string) (net.Conn, error) {
		if down.Load() {
			return nil, syscall.ECONNREFUSED
		}
		return netDial(ctx, network, address)
	}, false)
	for range 6 {
		if _, err := dial(context.Background(), "tcp", srv.addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial while down: %v", err)
		}
	}
	if w := fc.takeSleeps(); len(w) != 5 || w[4] < 790*time.Millisecond {
		t.Fatalf("waits while down %v, want 5 growing to just under 800ms", w)
	}
	// Just after the last failure the next dial waits most of its window;
	// 400 ms after it, the window's rest.
	fc.mu.Lock()
	fc.t = fc.t.Add(400 * time.Millisecond)
	fc.mu.Unlock()
	if _, err := dial(context.Background(), "tcp", srv.addr); err == nil {
		t.Fatal("dial while down succeeded")
	}
	if w := fc.takeSleeps(); len(w) != 1 || w[0] > 600*time.Millisecond || w[0] < 590*time.Millisecond {
		t.Fatalf("dial 400ms after a failure waited %v, want the window's rest (just under 600ms)", w)
	}
	// Long after the last failure, with the address back, no wait.
	down.Store(false)
	fc.mu.Lock()
	fc.t = fc.t.Add(time.Minute)
	fc.mu.Unlock()
	c, err := dial(context.Background(), "tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if w := fc.takeSleeps(); len(w) != 0 {
		t.Fatalf("dial a minute after the last failure waited %v", w)
	}
}

func TestPolicyLimiterSpacesDials(t *testing.T) {
	srv := startServer(t)
	srv.handle(answerThenClose)
	fc := newFakeClock()
	// A limiter of 10/s with a burst of 3, on the virtual clock.
	p := testPolicy(fc, rate.NewLimiter(10, 3))
	dial := p.wrap(netDial, false)
	var at []time.Duration
	start := fc.now()
	for i := 0; i < 10; i++ {
		c, err := dial(context.Background(), "tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, fc.now().Sub(start))
		c.Close() // never written: no early-close penalty
	}
	for i, d := range at {
		want := time.Duration(0)
		if i >= 3 {
			want = time.Duration(i-2) * 100 * time.Millisecond
		}
		if d != want {
			t.Errorf("dial %d at %v, want %v", i, d, want)
		}
	}
	if st := p.stats.snapshot(); st.LimiterWait != 700*time.Millisecond || st.BackoffWait != 0 || st.EarlyCloses != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPolicyWaitsRespectContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(p *connPolicy, addr string)
	}{
		{"limiter", func(p *connPolicy, _ string) {
			p.limiter = rate.NewLimiter(rate.Every(time.Hour), 1)
			p.limiter.Allow()
		}},
		{"backoff", func(p *connPolicy, addr string) {
			p.backoff = retry.Backoff{Min: time.Hour, Max: time.Hour, Rand: func() float64 { return 0.5 }}
			p.state(addr).failures.Store(3)
			p.state(addr).lastEnd.Store(time.Now().UnixNano()) // failed just now
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &connPolicy{clock: realClock()}
			tc.setup(p, "127.0.0.1:9")
			// No deadline: the wait itself must end when ctx is canceled.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(50*time.Millisecond, cancel)
			called := false
			inner := func(context.Context, string, string) (net.Conn, error) {
				called = true
				return nil, errors.New("dialed")
			}
			start := time.Now()
			_, err := p.wrap(inner, false)(ctx, "tcp", "127.0.0.1:9")
			if !errors.Is(err, context.Canceled) || called {
				t.Fatalf("err %v, dialed %v; want ctx's error and no dial", err, called)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("returned after %v", el)
			}
			if tc.name == "limiter" && p.limiter.Tokens() < -0.01 {
				t.Errorf("the canceled reservation was not returned: tokens %v", p.limiter.Tokens())
			}
		})
	}
}

func TestPolicyLimiterFailsFastPastDeadline(t *testing.T) {
	p := &connPolicy{clock: realClock(), limiter: rate.NewLimiter(rate.Every(time.Minute), 1)}
	p.limiter.Allow() // the next slot is a minute away
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.wrap(netDial, false)(ctx, "tcp", "127.0.0.1:9")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want a deadline error", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("waited %v for a slot past the deadline", el)
	}
	if tok := p.limiter.Tokens(); tok < -0.01 {
		t.Fatalf("token not returned: %v", tok)
	}
}

// TestPolicyBackoffPastDeadlineFailsWithTheLastDialError: a re-dial whose
// backoff runs past its dial's deadline fails at once, with the error of
// the dial that failed (ECONNREFUSED, a *net.OpError, as kafka-go's caller
// would have met), and dials nothing.
func TestPolicyBackoffPastDeadlineFailsWithTheLastDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // now refuses
	p := &connPolicy{clock: realClock(), backoff: retry.Backoff{Min: time.Hour, Max: time.Hour, Rand: func() float64 { return 0.5 }}}
	dials := 0
	inner := func(ctx context.Context, network, address string) (net.Conn, error) {
		dials++
		return netDial(ctx, network, address)
	}
	dial := p.wrap(inner, false)
	if _, err := dial(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("first dial: %v, want ECONNREFUSED", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = dial(ctx, "tcp", addr) // its backoff, half an hour, is past the minute
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("re-dial: %v (ctx %v); want the last dial's ECONNREFUSED *net.OpError at once", err, ctx.Err())
	}
	if dials != 1 {
		t.Fatalf("%d dials, want 1: the re-dial must not dial", dials)
	}
}

func TestPolicyTLSNeedsMoreTurns(t *testing.T) {
	srv := startServer(t)
	srv.handle(func(c net.Conn) {
		buf := make([]byte, 64)
		for range 2 { // two answers, like a TLS handshake, then nothing
			if _, err := c.Read(buf); err != nil {
				return
			}
			c.Write([]byte("hs"))
		}
		c.Read(buf)
		c.Close()
	})
	fc := newFakeClock()
	p := testPolicy(fc, nil)
	c, err := p.wrap(netDial, true)(context.Background(), "tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		answered, err := exchange(t, c)
		if i < 2 && (!answered || err != nil) || i == 2 && !errors.Is(err, io.EOF) {
			t.Fatalf("exchange %d: %v %v", i, answered, err)
		}
	}
	c.Close()
	if st := p.stats.snapshot(); st.EarlyCloses != 1 {
		t.Fatalf("a TLS connection closed after its handshake must count as early: %+v", st)
	}
}

func TestPolicyReadTimeoutIsNotAClose(t *testing.T) {
	srv := startServer(t)
	srv.handle(func(c net.Conn) { c.Read(make([]byte, 1)); c.Close() }) // silent until the test ends
	p := testPolicy(newFakeClock(), nil)
	c, err := p.wrap(netDial, false)(context.Background(), "tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
		t.Fatalf("err %v", err)
	}
	if st := p.stats.snapshot(); st.PeerCloses != 0 {
		t.Fatalf("a read timeout counted as a peer close: %+v", st)
	}
	c.Close()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// zeroConn is a net.Conn whose Read fills the buffer at once: what is left
// to measure is the wrapper.
type zeroConn struct{ net.Conn }

func (zeroConn) Read(b []byte) (int, error) { return len(b), nil }

// BenchmarkConnRead compares a Read through the policy's connection
// wrapper with a bare one, on a served connection (the steady state).
func BenchmarkConnRead(b *testing.B) {
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "policy"
		}
		b.Run(name, func(b *testing.B) {
			var c net.Conn = zeroConn{}
			if wrapped {
				pc := &policyConn{Conn: c, policy: &connPolicy{}, st: new(addrState), needTurns: 1}
				pc.served.Store(true)
				c = pc
			}
			buf := make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDial compares a loopback dial (and close) through the policy,
// with and without a limiter that never makes it wait, with a bare one:
// the policy's own cost per new connection.
func BenchmarkDial(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	cases := []struct {
		name string
		dial dialFunc
	}{
		{"bare", netDial},
		{"policy", (&connPolicy{clock: realClock()}).wrap(netDial, false)},
		{"policy+limiter", (&connPolicy{clock: realClock(), limiter: rate.NewLimiter(1e9, 1e6)}).wrap(netDial, false)},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := bc.dial(context.Background(), "tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
