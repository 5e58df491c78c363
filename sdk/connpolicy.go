package sdk

// connpolicy.go is the connection policy every dial of a client goes
// through: the process-wide limit on new connections (KIP-612), the
// jittered re-dial backoff per address, and the counters of ConnStats.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/retry"
	"golang.org/x/time/rate"
)

// ConnStats counts what the connection policy of one client instance did,
// cumulatively since the instance was made (unlike kafka-go's counters,
// which count since the previous Stats call). They are the client-side
// mirror of a broker's connection-accept-rate and
// connection-accept-throttle-time metrics (KIP-612).
type ConnStats struct {
	// Dials is the number of connection attempts that reached the network.
	Dials int64
	// ConnectionsCreated is the number of dials that succeeded.
	ConnectionsCreated int64
	// DialFailures is the number of dials that failed.
	DialFailures int64
	// EarlyCloses is the number of connections that closed before serving
	// a request (a throttling broker, a dying agent); each makes the next
	// dial to that address back off longer.
	EarlyCloses int64
	// PeerCloses is the number of connections the peer closed or reset,
	// early or not.
	PeerCloses int64
	// ThrottledTime is the total time dials waited, LimiterWait plus
	// BackoffWait. Waits of concurrent dials add up.
	ThrottledTime time.Duration
	// LimiterWait is the time dials waited for the connection-rate limiter.
	LimiterWait time.Duration
	// BackoffWait is the time dials waited in re-dial backoff.
	BackoffWait time.Duration
}

// connCounters holds ConnStats as atomics.
type connCounters struct {
	dials, created, failures, earlyCloses, peerCloses atomic.Int64
	limiterWait, backoffWait                          atomic.Int64 // nanoseconds
}

func (c *connCounters) snapshot() ConnStats {
	s := ConnStats{
		Dials:              c.dials.Load(),
		ConnectionsCreated: c.created.Load(),
		DialFailures:       c.failures.Load(),
		EarlyCloses:        c.earlyCloses.Load(),
		PeerCloses:         c.peerCloses.Load(),
		LimiterWait:        time.Duration(c.limiterWait.Load()),
		BackoffWait:        time.Duration(c.backoffWait.Load()),
	}
	s.ThrottledTime = s.LimiterWait + s.BackoffWait
	return s
}

// clock is the policy's source of time, replaced in tests.
type clock struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

func realClock() clock { return clock{now: time.Now, sleep: retry.SleepContext} }

// Process-wide limiters, one per (rate, burst), so that every client of a
// process configured alike shares one budget of new connections.
var (
	limitersMu sync.Mutex
	limiters   = map[limiterKey]*rate.Limiter{}
)

type limiterKey struct {
	perSecond float64
	burst     int
}

func sharedLimiter(perSecond float64, burst int) *rate.Limiter {
	limitersMu.Lock()
	defer limitersMu.Unlock()
	k := limiterKey{perSecond, burst}
	l, ok := limiters[k]
	if !ok {
		l = rate.NewLimiter(rate.Limit(perSecond), burst)
		limiters[k] = l
	}
	return l
}

// dialFunc is the signature of kafka.Dialer.DialFunc and kafka.Transport.Dial.
type dialFunc = func(ctx context.Context, network, address string) (net.Conn, error)

// connPolicy limits the rate of new connections and backs off re-dials of
// addresses whose connections fail. One per client instance; safe for
// concurrent use.
type connPolicy struct {
	limiter *rate.Limiter // nil: unlimited
	backoff retry.Backoff
	clock   clock
	logger  *slog.Logger
	stats   connCounters
	addrs   sync.Map // address string -> *addrState
	// onPeerClose, when set, runs after a peer closed or reset a
	// connection: the engine refreshes its metadata then.
	onPeerClose atomic.Pointer[func()]
	// rec receives the policy's events; nil without metrics. Set before
	// the first dial.
	rec metrics.Recorder
}

// addrState is what the policy remembers about one address.
type addrState struct {
	// failures counts consecutive connections that failed to dial or
	// closed before serving a request; reset by a served request.
	failures atomic.Int32
	// peerClosed is set when the peer closed a connection, so that the
	// next dial waits a short jittered delay instead of reconnecting in
	// lock-step with every other client the peer dropped.
	peerClosed atomic.Bool
	// lastEnd is when the last failure or peer close happened (Unix
	// nanoseconds on the policy's clock): a re-dial's delay runs from
	// then, so a dial long after it waits nothing.
	lastEnd atomic.Int64
	// lastErr is the last dial's error, nil after a dial that connected.
	lastErr atomic.Pointer[error]
}

// maxFailures caps addrState.failures; the backoff is capped long before.
const maxFailures = 1 << 10

func newConnPolicy(c config) *connPolicy {
	return &connPolicy{limiter: c.limiter, backoff: c.redialBackoff, clock: c.clock, logger: c.logger}
}

func (p *connPolicy) state(address string) *addrState {
	if st, ok := p.addrs.Load(address); ok {
		return st.(*addrState)
	}
	st, _ := p.addrs.LoadOrStore(address, new(addrState))
	return st.(*addrState)
}

// wrap returns a dial function that applies the policy around inner. tls
// tells whether kafka-go runs TLS on top of the returned connection (the
// policy then needs more request/response turns to know that a Kafka
// request was served, since it sees the handshake too).
func (p *connPolicy) wrap(inner dialFunc, tls bool) dialFunc {
	turns := int32(1)
	if tls {
		turns = tlsServedTurns
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		return p.dial(ctx, network, address, inner, turns)
	}
}

// tlsServedTurns is how many times the peer must answer a write before a
// TLS connection counts as having served a request: the handshake takes
// one (TLS 1.3) or two (TLS 1.2) turns, so the third answer is Kafka's.
const tlsServedTurns = 3

func (p *connPolicy) dial(ctx context.Context, network, address string, inner dialFunc, turns int32) (net.Conn, error) {
	st := p.state(address)
	if err := p.waitBackoff(ctx, address, st); err != nil {
		return nil, err
	}
	if err := p.waitLimiter(ctx, address); err != nil {
		return nil, err
	}
	p.stats.dials.Add(1)
	conn, err := inner(ctx, network, address)
	if p.rec != nil {
		p.rec.Dialed(address, err == nil)
	}
	if err != nil {
		p.stats.failures.Add(1)
		st.lastErr.Store(&err)
		p.fail(st)
		return nil, err
	}
	st.lastErr.Store(nil)
	p.stats.created.Add(1)
	return &policyConn{Conn: conn, policy: p, st: st, addr: address, needTurns: turns}, nil
}

func (p *connPolicy) fail(st *addrState) {
	st.lastEnd.Store(p.clock.now().UnixNano())
	if st.failures.Load() < maxFailures {
		st.failures.Add(1)
	}
}

// waitBackoff sleeps before re-dialing an address that failed (growing
// full-jitter delay) or whose connection the peer just closed (one short
// jittered delay). The delay runs from the failure or close, as Kafka's
// own clients count reconnect.backoff.ms from their last attempt: an
// address that failed a while ago (a broker restarted since, which the
// client had no reason to dial until it led a partition again) is dialed
// at once, not after the backoff its old failures earned.
func (p *connPolicy) waitBackoff(ctx context.Context, address string, st *addrState) error {
	f := st.failures.Load()
	peer := st.peerClosed.Swap(false)
	if f == 0 && !peer {
		return nil
	}
	attempt := 0 // a peer close of a healthy connection: one short window
	if f > 0 {
		attempt = int(f) - 1 // the first re-dial after a failure waits up to Min
	}
	start := p.clock.now()
	d := p.backoff.Delay(attempt) - start.Sub(time.Unix(0, st.lastEnd.Load()))
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && start.Add(d).After(dl) {
		// The dial could not begin before its deadline: fail at once,
		// with the error of the dial that earned the backoff (kafka-go's
		// caller would have met it again), not after the whole deadline
		// with only the deadline's.
		if last := st.lastErr.Load(); last != nil {
			return fmt.Errorf("sdk: re-dial of %s waits %v after its last failure, past the dial's deadline; last dial: %w", address, d.Round(time.Millisecond), *last)
		}
	}
	err := p.clock.sleep(ctx, d)
	waited := p.clock.now().Sub(start)
	p.stats.backoffWait.Add(int64(waited))
	if p.rec != nil && waited > 0 {
		p.rec.DialWaited(address, metrics.WaitRedial, waited)
	}
	if err != nil {
		return fmt.Errorf("sdk: waiting %v to re-dial: %w", d, err)
	}
	return nil
}

func (p *connPolicy) waitLimiter(ctx context.Context, address string) error {
	if p.limiter == nil {
		return nil
	}
	now := p.clock.now()
	r := p.limiter.ReserveN(now, 1)
	if !r.OK() {
		return errors.New("sdk: connection rate limiter has a burst of 0")
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && now.Add(d).After(dl) {
		// The slot comes after the dial's deadline: give the token back
		// and fail now instead of sleeping until the deadline.
		r.CancelAt(now)
		return fmt.Errorf("sdk: the connection rate limit has no slot for %v, after the dial deadline: %w", d, context.DeadlineExceeded)
	}
	err := p.clock.sleep(ctx, d)
	end := p.clock.now()
	p.stats.limiterWait.Add(int64(end.Sub(now)))
	if p.rec != nil && end.After(now) {
		p.rec.DialWaited(address, metrics.WaitLimiter, end.Sub(now))
	}
	if err != nil {
		r.CancelAt(end)
		return fmt.Errorf("sdk: waiting %v for the connection rate limit: %w", d, err)
	}
	return nil
}

// policyConn observes a connection just enough to tell whether it served a
// request before it closed. After that, Read and Write cost one atomic
// load each.
type policyConn struct {
	net.Conn
	policy    *connPolicy
	st        *addrState
	addr      string
	needTurns int32

	served        atomic.Bool
	wrote         atomic.Bool  // a write happened since the last answer
	turns         atomic.Int32 // answers seen after a write
	ended         atomic.Bool  // the close was accounted for
	closedLocally atomic.Bool
}

func (c *policyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.served.Load() && c.wrote.Swap(false) {
		if c.turns.Add(1) >= c.needTurns {
			c.served.Store(true)
			c.st.failures.Store(0)
		}
	}
	if err != nil {
		c.noteError(err)
	}
	return n, err
}

func (c *policyConn) Write(b []byte) (int, error) {
	if !c.served.Load() {
		c.wrote.Store(true)
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.noteError(err)
	}
	return n, err
}

// noteError records a close by the peer; timeouts and errors after a local
// Close are not the peer's doing.
func (c *policyConn) noteError(err error) {
	if c.closedLocally.Load() {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return
	}
	if !c.ended.CompareAndSwap(false, true) {
		return
	}
	c.policy.stats.peerCloses.Add(1)
	c.st.lastEnd.Store(c.policy.clock.now().UnixNano())
	c.st.peerClosed.Store(true)
	if f := c.policy.onPeerClose.Load(); f != nil {
		(*f)()
	}
	c.end(true, !c.served.Load())
}

func (c *policyConn) Close() error {
	c.closedLocally.Store(true)
	// A connection the client gives up on before it served anything (a
	// handshake or first request that timed out) also counts as a failure
	// of the address; one never written to does not.
	if c.ended.CompareAndSwap(false, true) {
		c.end(false, !c.served.Load() && (c.wrote.Load() || c.turns.Load() > 0))
	}
	return c.Conn.Close()
}

// end accounts for the connection's end, once: by the peer or the
// client, before it served a request (early: a failure of the address) or
// after.
func (c *policyConn) end(peer, early bool) {
	if early {
		c.policy.stats.earlyCloses.Add(1)
		c.policy.fail(c.st)
	}
	r := c.policy.rec
	switch {
	case r == nil:
	case peer && early:
		r.ConnClosed(c.addr, metrics.ClosePeerEarly)
	case peer:
		r.ConnClosed(c.addr, metrics.ClosePeer)
	case early:
		r.ConnClosed(c.addr, metrics.CloseLocalEarly)
	default:
		r.ConnClosed(c.addr, metrics.CloseLocal)
	}
}
