package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/retry"
)

// Reader is a drop-in replacement for *kafka.Reader that stamps the azkafka
// client ID on every connection and keeps transient errors from the caller.
//
// It has the same methods as *kafka.Reader. Create it with NewReader; the
// zero value is not usable. Methods are safe for concurrent use as far as
// kafka.Reader's are.
//
// kafka-go's Reader already reconnects on its own and hides most connection
// errors, but it surfaces some: a partition reader that failed to connect
// ReaderConfig.MaxAttempts times in a row, a consumer group that could not
// join, CommitMessages when the coordinator connection died ("use of
// closed network connection"), and a context.Canceled of a group
// generation that kafka-go ended while a partition reader was connecting.
// Reader absorbs those when the retry policy calls them transient (see
// retry.IsTransient; a context's end that is not the caller's ctx is
// kafka-go's own and is absorbed too): it logs them (rate-limited,
// at most one line per 5 s), waits a full-jitter backoff and tries again
// until ctx is done. The retry policy's MaxAttempts does not apply: a
// consumer waits for the cluster to come back rather than giving up.
//
// Nothing is skipped: an absorbed error never advances the reader's offset,
// and ReadMessage returns the fetched message even when its commit fails.
// io.EOF is returned only after Close, as with kafka-go.
//
// This matters because kafka-go's consumer-group Reader does skip stored
// messages under connection closes, in one sequence of events: ReadMessage
// fetches the message at offset N and commits N+1; the broker stores the
// commit, but the coordinator connection closes before the response
// arrives. kafka-go's ReadMessage then returns an empty message with the
// commit error: the message it fetched is dropped. The closed connection
// ends the group generation, and the next one starts at the committed
// offset, N+1. The caller gets N+1 (or a later message kafka-go had
// buffered) after N-1, and never N. Reader cannot take that path: its
// ReadMessage returns every message it fetched (a transiently failed
// commit is retried, through the next generation, before it returns) and
// commits only that message, so it never moves the group's committed
// offset past a message the caller was not given. Below the commits, kafka-go's fetch
// path skips nothing: within a generation a partition's records are handed
// out in order (a fetch response cut by a close is fetched again from the
// first record not handed out) and each generation starts at the committed
// offset. Offsets that hold no record (compacted away) are passed over, as
// kafka-go does; they are not skips. TestReaderLostCommitResponse and
// TestReaderCutFetchResponses run both readers through these faults.
type Reader struct {
	s            *session
	inner        *kafka.Reader
	policy       retry.Policy
	group        bool
	counters     counters
	logTransient rate.Sometimes
	closed       atomic.Bool
	// closing is canceled by Close, to cut a retry backoff short.
	closing context.Context
	close   context.CancelFunc
}

// NewReader returns a Reader for config, whose Dialer it replaces by one
// that stamps the azkafka client ID and applies the connection policy:
//
//	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "billing", Topic: "events"})
//
// TLS, SASL, timeouts and resolver of config.Dialer, when set, are kept.
// Options win over AZKAFKA_* environment variables.
//
// Unlike kafka.NewReader, which panics, NewReader returns an error for an
// invalid config, as it does for invalid options or environment. It may
// detect the availability zone (once per process) unless WithAZ or
// AZKAFKA_AZ provides it.
func NewReader(config kafka.ReaderConfig, opts ...Option) (_ *Reader, err error) {
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("sdk.NewReader: invalid kafka.ReaderConfig: %w", err)
	}
	s, err := newSession(context.Background(), readerOptions(config.Dialer, opts))
	if err != nil {
		return nil, fmt.Errorf("sdk.NewReader: %w", err)
	}
	config.Dialer = s.dialer()
	defer func() {
		// kafka.NewReader panics when the consumer group config is invalid.
		if p := recover(); p != nil {
			err = fmt.Errorf("sdk.NewReader: invalid kafka.ReaderConfig: %v", p)
		}
	}()
	r := &Reader{
		s:            s,
		inner:        kafka.NewReader(config),
		policy:       s.retry,
		group:        config.GroupID != "",
		logTransient: rate.Sometimes{Interval: 5 * time.Second},
	}
	r.closing, r.close = context.WithCancel(context.Background())
	return r, nil
}

// ReadMessage reads the next message and, with a consumer group, commits
// it, like kafka.Reader.ReadMessage, absorbing transient errors. When the
// fetch succeeded but the commit did not (ctx done, or an error that is not
// transient), it returns the message together with the error, so that the
// caller can still process it: a caller that drops a message returned with
// an error may skip it, since the failed commit may have been stored.
// kafka-go's ReadMessage drops it itself (see Reader).
func (r *Reader) ReadMessage(ctx context.Context) (kafka.Message, error) {
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("fetching message: %w", err)
	}
	if r.group {
		if err := r.CommitMessages(ctx, m); err != nil {
			return m, fmt.Errorf("committing message: %w", err)
		}
	}
	return m, nil
}

// FetchMessage returns the next message without committing it, like
// kafka.Reader.FetchMessage. Transient errors are logged and retried until
// ctx is done; it returns ctx's error then, io.EOF after Close, or an error
// that is not transient.
func (r *Reader) FetchMessage(ctx context.Context) (kafka.Message, error) {
	for attempt := 0; ; attempt++ {
		m, err := r.inner.FetchMessage(ctx)
		if err == nil {
			return m, nil
		}
		if r.closed.Load() {
			// kafka-go may still hand out an error its partition reader
			// queued before Close; after Close the answer is io.EOF.
			return kafka.Message{}, io.EOF
		}
		if !r.absorb(ctx, "fetch", err, r.policy.Retryable(err) || innerContextEnd(ctx, err)) {
			return m, err
		}
		if werr := r.backoff(ctx, attempt); werr != nil {
			return kafka.Message{}, werr
		}
	}
}

// CommitMessages commits msgs like kafka.Reader.CommitMessages, retrying
// transient failures until ctx is done. Errors that mean the group
// generation changed under the commit (RebalanceInProgress,
// IllegalGeneration, UnknownMemberId) are retried too: kafka-go sends the
// retry through the next generation. A retried commit can reach the broker
// after the next generation started reading from the older committed
// offset: the group then re-delivers the messages after it (duplicates),
// and committing those again moves the offset back to them until they are
// read past once more. Likewise, a retried commit that lands after the
// partition moved to another member can make that member re-read
// messages. Neither skips a message.
func (r *Reader) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	for attempt := 0; ; attempt++ {
		err := r.inner.CommitMessages(ctx, msgs...)
		if err == nil {
			return nil
		}
		if !r.absorb(ctx, "commit", err, r.policy.Retryable(err) || isGenerationChange(err) || innerContextEnd(ctx, err)) {
			return err
		}
		if werr := r.backoff(ctx, attempt); werr != nil {
			return fmt.Errorf("%w (commit not retried: %w)", err, werr)
		}
	}
}

// readerOptions puts the user's Dialer, if any, first in opts as the base
// whose TLS, SASL, timeouts and client ID the SDK's Dialer keeps.
func readerOptions(d *kafka.Dialer, opts []Option) []Option {
	if d == nil {
		return opts
	}
	return append([]Option{WithBaseDialer(d), withFallbackUserID(d.ClientID)}, opts...)
}

// innerContextEnd reports whether err is a context's end that is not the
// caller's: kafka-go cancels a group generation's context when the
// generation ends (a rebalance, a lost coordinator), and a partition reader
// that was connecting then can queue that context.Canceled for
// FetchMessage (its sendError races the queue against the ended context).
// The consumer goes on in the next generation; the caller's own ctx ending
// is never retried.
func innerContextEnd(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func isGenerationChange(err error) bool {
	return errors.Is(err, kafka.RebalanceInProgress) ||
		errors.Is(err, kafka.IllegalGeneration) ||
		errors.Is(err, kafka.UnknownMemberId)
}

// absorb decides whether err, from op, is retried: only when retryable,
// ctx is not done and the reader is open. It counts and logs what it
// absorbs.
func (r *Reader) absorb(ctx context.Context, op string, err error, retryable bool) bool {
	// A bare io.EOF is not only kafka-go's "closed" marker: a consumer
	// group that failed to join returns its coordinator connection's
	// io.EOF as is. Only Close, recorded in r.closed, ends the reader.
	if !retryable || ctx.Err() != nil || r.closed.Load() {
		return false
	}
	r.counters.transient.Add(1)
	r.counters.retries.Add(1)
	r.logTransient.Do(func() {
		r.s.logger.Info("azkafka: retrying after a transient error", "op", op, "error", err)
	})
	return true
}

// backoff waits the retry policy's delay before retry number attempt,
// returning early with ctx's error, or with io.EOF when the reader is
// closed meanwhile.
func (r *Reader) backoff(ctx context.Context, attempt int) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.closing, cancel)
	defer stop()
	err := r.policy.Sleep(sctx, attempt)
	if err != nil && ctx.Err() == nil && r.closed.Load() {
		return io.EOF
	}
	return err
}

// Close closes the reader, like kafka.Reader.Close. Pending and later
// FetchMessage calls return io.EOF.
func (r *Reader) Close() error {
	r.closed.Store(true)
	r.close()
	return r.inner.Close()
}

// Config returns the reader's configuration, with the SDK's Dialer.
func (r *Reader) Config() kafka.ReaderConfig { return r.inner.Config() }

// Lag returns the lag of the last message returned by ReadMessage, or -1
// with a consumer group, like kafka.Reader.Lag.
func (r *Reader) Lag() int64 { return r.inner.Lag() }

// Offset returns the reader's current offset, or -1 with a consumer group,
// like kafka.Reader.Offset.
func (r *Reader) Offset() int64 { return r.inner.Offset() }

// ReadLag fetches the partition's last offset and returns the lag, like
// kafka.Reader.ReadLag, retrying transient errors until ctx is done.
func (r *Reader) ReadLag(ctx context.Context) (int64, error) {
	for attempt := 0; ; attempt++ {
		lag, err := r.inner.ReadLag(ctx)
		if err == nil || !r.absorb(ctx, "read lag", err, r.policy.Retryable(err)) {
			return lag, err
		}
		if werr := r.backoff(ctx, attempt); werr != nil {
			return 0, fmt.Errorf("%w (not retried: %w)", err, werr)
		}
	}
}

// SetOffset moves the reader to offset, like kafka.Reader.SetOffset.
func (r *Reader) SetOffset(offset int64) error { return r.inner.SetOffset(offset) }

// SetOffsetAt moves the reader to the first offset at or after t, like
// kafka.Reader.SetOffsetAt, retrying transient errors until ctx is done.
func (r *Reader) SetOffsetAt(ctx context.Context, t time.Time) error {
	for attempt := 0; ; attempt++ {
		err := r.inner.SetOffsetAt(ctx, t)
		if err == nil || !r.absorb(ctx, "set offset", err, r.policy.Retryable(err)) {
			return err
		}
		if werr := r.backoff(ctx, attempt); werr != nil {
			return fmt.Errorf("%w (not retried: %w)", err, werr)
		}
	}
}

// Stats returns kafka-go's reader statistics since the previous call, plus
// the SDK's counters (see SDKStats).
func (r *Reader) Stats() ReaderStats {
	return ReaderStats{ReaderStats: r.inner.Stats(), SDK: r.counters.snapshot(r.s)}
}
