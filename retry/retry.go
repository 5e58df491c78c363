package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// IsTransient reports whether err is worth retrying on a fresh connection:
// the peer closed or reset the connection, refused it, or a Kafka broker
// answered with an error code that kafka-go marks as temporary (leader
// moved, coordinator loading, throttling, ...).
//
// Transient, also when wrapped (errors.Is / errors.As):
//   - io.EOF, io.ErrUnexpectedEOF (a close mid-response or mid-TLS-handshake)
//   - net.ErrClosed ("use of closed network connection")
//   - syscall.ECONNRESET, EPIPE, ECONNREFUSED, ECONNABORTED
//   - a kafka.Error whose Temporary method reports true
//   - kafka-go's client-side "topic not found", "topic partition not found"
//     and "topic partition has no leader" (protocol.ErrNoTopic,
//     ErrNoPartition, ErrNoLeader): the client's cached metadata lacks what
//     the request needs, as after a metadata fetch cut short by a closed
//     connection; fresh metadata answers it, as for the broker's own
//     UNKNOWN_TOPIC_OR_PARTITION and LEADER_NOT_AVAILABLE. A topic that
//     really does not exist is therefore retried until the attempts run
//     out, as Kafka's Java producer waits max.block.ms for its metadata.
//   - a kafka.WriteErrors whose non-nil entries are all transient (and at
//     least one is non-nil): resending it resends only failed messages, so a
//     single permanent failure makes the whole batch permanent for the caller
//
// Never transient: nil, context.Canceled and context.DeadlineExceeded (the
// caller gave up; this wins over any other error in the chain), and
// timeouts (os.ErrDeadlineExceeded): a request that timed out may be slow
// rather than lost, and blind resends double the load on a struggling broker.
// Refusals are not transient either, so they reach the caller at once with
// their cause instead of being retried until the budget runs out: a failed
// SASL authentication (kafka.SASLAuthenticationFailed, as Kafka answers a
// wrong password or an unknown user), an authorizer's refusal
// (kafka.TopicAuthorizationFailed, ClusterAuthorizationFailed, ...), and a
// broker certificate the client does not trust (crypto/tls's
// CertificateVerificationError: unknown CA, expired, wrong host).
//
// IsTransient is safe for concurrent use.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		return writeErrorsTransient(we)
	}
	if errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, protocol.ErrNoTopic) ||
		errors.Is(err, protocol.ErrNoPartition) ||
		errors.Is(err, protocol.ErrNoLeader) {
		return true
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	return false
}

func writeErrorsTransient(we kafka.WriteErrors) bool {
	seen := false
	for _, e := range we {
		if e == nil {
			continue
		}
		seen = true
		if !IsTransient(e) {
			return false
		}
	}
	return seen
}

// Backoff computes full-jitter exponential delays: the delay before retry
// number attempt (0-based) is uniformly random in [0, min(Max, Min·2^attempt)).
// Full jitter spreads clients that failed at the same instant over the
// whole window instead of keeping them in lock-step.
//
// The zero value is usable. A Backoff is safe for concurrent use when Rand is
// (the default is).
type Backoff struct {
	// Min is the upper bound of the first delay. Default: 100ms.
	Min time.Duration
	// Max caps every delay. Default: 1s (or Min, when Min is larger).
	Max time.Duration
	// Rand returns a number in [0, 1). Default: math/rand/v2.Float64.
	Rand func() float64
}

// Default backoff bounds, the same as kafka.Writer's WriteBackoffMin/Max.
const (
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = time.Second
)

// Ceiling returns the exclusive upper bound of Delay(attempt):
// min(Max, Min·2^attempt), without overflow for any attempt.
func (b Backoff) Ceiling(attempt int) time.Duration {
	lo, hi := b.bounds()
	if attempt < 0 {
		attempt = 0
	}
	c := lo
	for i := 0; i < attempt && c < hi; i++ {
		c *= 2
		if c <= 0 { // overflowed: hi is the bound
			return hi
		}
	}
	if c > hi {
		return hi
	}
	return c
}

// Delay returns the full-jitter delay before retry number attempt (0-based).
func (b Backoff) Delay(attempt int) time.Duration {
	c := b.Ceiling(attempt)
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	f := r()
	if f < 0 || f >= 1 || f != f {
		f = 0 // a broken Rand must not produce a delay outside the window
	}
	return time.Duration(f * float64(c))
}

func (b Backoff) bounds() (lo, hi time.Duration) {
	lo, hi = b.Min, b.Max
	if lo <= 0 {
		lo = DefaultBackoffMin
	}
	if hi <= 0 {
		hi = DefaultBackoffMax
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// Policy bounds retries by attempts and spaces them with a Backoff.
// The zero value is usable. Policy is safe for concurrent use when its
// functions are.
type Policy struct {
	// MaxAttempts is the total number of tries, the first included.
	// Default: 10 (kafka.Writer's MaxAttempts default).
	MaxAttempts int
	// Backoff spaces the tries. Default: the zero Backoff (100ms..1s).
	Backoff Backoff
	// ShouldRetry decides whether an error is retried. Default: IsTransient.
	ShouldRetry func(error) bool
	// Wait sleeps for d or until ctx is done, returning ctx.Err() in the
	// latter case. Default: a timer. Tests inject a fake clock here.
	Wait func(ctx context.Context, d time.Duration) error
}

// DefaultMaxAttempts is Policy.MaxAttempts when unset.
const DefaultMaxAttempts = 10

// Attempts returns MaxAttempts, or its default.
func (p Policy) Attempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// Retryable reports whether err should be retried under p.
func (p Policy) Retryable(err error) bool {
	if p.ShouldRetry != nil {
		return p.ShouldRetry(err)
	}
	return IsTransient(err)
}

// Sleep waits Backoff.Delay(attempt), or less if ctx ends first, in which
// case it returns ctx.Err().
func (p Policy) Sleep(ctx context.Context, attempt int) error {
	d := p.Backoff.Delay(attempt)
	if p.Wait != nil {
		return p.Wait(ctx, d)
	}
	return SleepContext(ctx, d)
}

// SleepContext waits d or until ctx is done, returning ctx.Err() then.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do calls fn until it succeeds, returns an error p does not retry, the
// attempts run out, or ctx is done. It returns nil or the last error of fn,
// wrapped with the number of attempts when more than one was made, so
// errors.Is and errors.As see the original error. When ctx ends during a
// backoff, the error wraps both fn's last error and ctx.Err().
//
// Useful with kafka-go directly:
//
//	err := retry.Policy{}.Do(ctx, func(ctx context.Context) error {
//		return conn.CommitMessages(ctx, msgs...)
//	})
func (p Policy) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	n := p.Attempts()
	var err error
	for attempt := 0; attempt < n; attempt++ {
		if attempt > 0 {
			if werr := p.Sleep(ctx, attempt-1); werr != nil {
				return fmt.Errorf("retry: giving up after %d attempts: %w", attempt, errors.Join(err, werr))
			}
		}
		err = fn(ctx)
		if err == nil {
			return nil
		}
		if !p.Retryable(err) {
			if attempt == 0 {
				return err
			}
			return fmt.Errorf("retry: attempt %d of %d: %w", attempt+1, n, err)
		}
	}
	if n == 1 {
		return err
	}
	return fmt.Errorf("retry: giving up after %d attempts: %w", n, err)
}
