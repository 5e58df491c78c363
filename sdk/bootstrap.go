package sdk

// bootstrap.go decides when a client that has never reached its cluster
// gives up: kafka-go's clients return the dial error of a mistyped address
// at once, where an engine that retries would wait out its budget.

import (
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBootstrapTimeout is how long a client that has never had an
// answer from its cluster keeps trying while every bootstrap address
// refuses, drops its connections or does not answer (a process started
// before its broker, a firewall that drops packets), counted from the
// first dial (once a broker answered any request, from the first failure:
// a slow handshake of the client's own is not silence): then the call
// waiting for the cluster returns an error naming each address and its
// cause. Errors no retry
// fixes (an unknown host, TLS against a plaintext port or the reverse, a
// server that is not Kafka) end the wait once every address has failed
// with one. Once a broker has answered, the clients ride through closes,
// refusals and elections instead.
const DefaultBootstrapTimeout = 10 * time.Second

// bootstrap watches the dials of one client until its cluster first
// answers a Metadata request. Safe for concurrent use.
type bootstrap struct {
	seeds   []string // host:port, as the engine dials them
	timeout time.Duration
	// onGiveUp is called, without locks held, with the error of a
	// bootstrap that gave up.
	onGiveUp func(error)

	reached atomic.Bool
	heard   atomic.Bool // a broker answered a request (heardFrom)
	mu      sync.Mutex
	// failedOnce: a dial or request failed since the attempt began (the
	// timer then runs for that failure, not only for silence).
	failedOnce bool
	last       map[string]error // the last failure of each seed since the attempt began
	hard       map[string]bool  // seeds whose last failure no retry fixes
	timer      *time.Timer
	gaveUp     error
	// over is closed once the attempt gave up and onGiveUp returned; a
	// new one begins with each attempt (rearm).
	over chan struct{}
}

func newBootstrap(seeds []string, timeout time.Duration) *bootstrap {
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	b := &bootstrap{timeout: timeout, last: map[string]error{}, hard: map[string]bool{}, over: make(chan struct{})}
	for _, s := range seeds {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, "9092") // the engine's default port
		}
		if !slices.Contains(b.seeds, s) {
			b.seeds = append(b.seeds, s)
		}
	}
	return b
}

// answered notes that the cluster answered: the client has reached it.
func (b *bootstrap) answered() {
	if b.reached.Load() {
		return
	}
	b.reached.Store(true)
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
}

// errNoAnswer is the last error of a bootstrap address dialed that has
// neither failed nor answered.
var errNoAnswer = errors.New("no answer")

// dialing notes a dial of addr before the cluster answered: the timeout
// runs from the first one, until a broker answers any request (heard).
func (b *bootstrap) dialing(addr string) {
	if b.reached.Load() || b.heard.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gaveUp != nil || !slices.Contains(b.seeds, addr) {
		return
	}
	if _, ok := b.last[addr]; !ok {
		b.last[addr] = errNoAnswer
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(b.timeout, b.expire)
	}
}

// heardFrom notes that a broker answered a request (ApiVersions, a SASL
// step) before the cluster answered Metadata: it is not silent, and the
// time the client then takes (a slow SASL mechanism) is not counted. The
// timeout then runs from the next failure, as for refusals.
func (b *bootstrap) heardFrom() {
	if b.reached.Load() || b.heard.Load() {
		return
	}
	b.heard.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gaveUp == nil && b.timer != nil && len(b.hard) == 0 && !b.failedOnce {
		b.timer.Stop()
		b.timer = nil
	}
}

// failed notes that the connection to addr failed with err before the
// cluster answered.
func (b *bootstrap) failed(addr string, err error) {
	if b.reached.Load() || err == nil {
		return
	}
	b.mu.Lock()
	if b.gaveUp != nil || !slices.Contains(b.seeds, addr) {
		b.mu.Unlock()
		return
	}
	b.last[addr] = err
	b.hard[addr] = unfixable(err)
	b.failedOnce = true
	if b.timer == nil {
		b.timer = time.AfterFunc(b.timeout, b.expire)
	}
	give := len(b.hard) == len(b.seeds)
	for _, h := range b.hard {
		give = give && h
	}
	var gerr error
	over := b.over
	if give {
		gerr = b.giveUpLocked(false)
	}
	b.mu.Unlock()
	b.announce(gerr, over)
}

// givenUp reports whether the attempt gave up (its error is the engine's
// refusal then).
func (b *bootstrap) givenUp() bool { return b.gaveUpError() != nil }

// gaveUpError is the error of the attempt that gave up, nil while it has
// not.
func (b *bootstrap) gaveUpError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gaveUp
}

// expire gives up when the timeout passed without an answer.
func (b *bootstrap) expire() {
	if b.reached.Load() {
		return
	}
	b.mu.Lock()
	var err error
	over := b.over
	if b.gaveUp == nil {
		err = b.giveUpLocked(true)
	}
	b.mu.Unlock()
	b.announce(err, over)
}

// announce tells of a give-up, err (nil: none), of the attempt whose over
// channel is over: onGiveUp, then over closed.
func (b *bootstrap) announce(err error, over chan struct{}) {
	if err == nil {
		return
	}
	if b.onGiveUp != nil {
		b.onGiveUp(err)
	}
	close(over)
}

// overSignal is closed once the current attempt has given up and its
// refusal is recorded.
func (b *bootstrap) overSignal() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

func (b *bootstrap) giveUpLocked(timedOut bool) error {
	e := &BootstrapError{Timeout: b.timeout, TimedOut: timedOut, sinceFailure: b.heard.Load()}
	for _, s := range b.seeds {
		e.Addrs = append(e.Addrs, s)
		e.Errs = append(e.Errs, b.last[s])
	}
	b.gaveUp = e
	return e
}

// rearm starts a new attempt after one that gave up: a call made later
// gets the whole timeout again (the broker may be up by now). It returns
// the error of the attempt it ended, nil when none had given up.
func (b *bootstrap) rearm() error {
	if b.reached.Load() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.gaveUp
	if prev == nil {
		return nil
	}
	b.gaveUp = nil
	b.over = make(chan struct{})
	b.failedOnce = false
	clear(b.last)
	clear(b.hard)
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return prev
}
