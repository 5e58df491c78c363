package sdk

// bootstrap.go decides when a client that has never reached its cluster
// gives up: kafka-go's clients return the dial error of a mistyped address
// at once, where an engine that retries would wait out its budget.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultBootstrapTimeout is how long a client that has never had an
// answer from its cluster keeps trying while every bootstrap address
// refuses or drops its connections (a process started before its broker),
// counted from the first failure: then the call waiting for the cluster
// returns an error naming each address and its cause. Errors no retry
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
	mu      sync.Mutex
	last    map[string]error // the last failure of each seed since the attempt began
	hard    map[string]bool  // seeds whose last failure no retry fixes
	timer   *time.Timer
	gaveUp  error
}

func newBootstrap(seeds []string, timeout time.Duration) *bootstrap {
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	b := &bootstrap{timeout: timeout, last: map[string]error{}, hard: map[string]bool{}}
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
	if b.timer == nil {
		b.timer = time.AfterFunc(b.timeout, b.expire)
	}
	give := len(b.hard) == len(b.seeds)
	for _, h := range b.hard {
		give = give && h
	}
	var gerr error
	if give {
		gerr = b.giveUpLocked(false)
	}
	b.mu.Unlock()
	if gerr != nil && b.onGiveUp != nil {
		b.onGiveUp(gerr)
	}
}

// expire gives up when the timeout passed without an answer.
func (b *bootstrap) expire() {
	if b.reached.Load() {
		return
	}
	b.mu.Lock()
	var err error
	if b.gaveUp == nil {
		err = b.giveUpLocked(true)
	}
	b.mu.Unlock()
	if err != nil && b.onGiveUp != nil {
		b.onGiveUp(err)
	}
}

func (b *bootstrap) giveUpLocked(timedOut bool) error {
	e := &BootstrapError{Timeout: b.timeout, TimedOut: timedOut}
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
	clear(b.last)
	clear(b.hard)
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return prev
}

// unfixable reports whether a failure to reach a broker is one no retry
// fixes: an unknown host, a TLS handshake the port does not speak or
// closes (TLS against a plaintext listener), bytes that are not Kafka's
// (a plaintext client on a TLS port, an HTTP server), a certificate not
// trusted, a SASL mechanism the broker lacks.
func unfixable(err error) bool {
	var dns *net.DNSError
	var rhe tls.RecordHeaderError
	var alert tls.AlertError
	var cve *tls.CertificateVerificationError
	var hs *handshakeError
	switch {
	case errors.As(err, &dns):
		return dns.IsNotFound
	case errors.As(err, &rhe), errors.As(err, &alert), errors.As(err, &cve), errors.As(err, &hs):
		return true
	case errors.Is(err, ErrBadResponse), errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.SaslAuthenticationFailed):
		return true
	}
	return false
}

// BootstrapError is the error of a call made while the client has never
// reached its cluster, once every bootstrap address failed with an error
// no retry fixes, or DefaultBootstrapTimeout passed. It names each address
// and its last error; errors.Is and errors.As see those errors
// (*net.DNSError, *net.OpError, syscall.ECONNREFUSED, ErrBadResponse, ...).
type BootstrapError struct {
	// Addrs are the bootstrap addresses, Errs the last error of each (nil
	// for an address not dialed yet).
	Addrs []string
	Errs  []error
	// TimedOut: the timeout passed; else every address failed with an
	// error no retry fixes.
	TimedOut bool
	Timeout  time.Duration
}

func (e *BootstrapError) Error() string {
	var b strings.Builder
	b.WriteString("sdk: no broker reached")
	if e.TimedOut {
		fmt.Fprintf(&b, " within %v", e.Timeout)
	}
	b.WriteString(": ")
	for i, a := range e.Addrs {
		if i > 0 {
			b.WriteString("; ")
		}
		if e.Errs[i] == nil {
			b.WriteString(a + ": not dialed yet")
			continue
		}
		text := strings.TrimPrefix(e.Errs[i].Error(), "sdk: ")
		if !strings.HasPrefix(text, a) {
			text = a + ": " + text
		}
		b.WriteString(text)
	}
	return b.String()
}

// Unwrap returns the addresses' errors.
func (e *BootstrapError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
