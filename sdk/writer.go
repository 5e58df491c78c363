package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/retry"
)

// Writer is a drop-in replacement for *kafka.Writer that stamps the azkafka
// client ID on every connection and resends messages whose delivery failed
// with a transient error (see retry.IsTransient): a connection closed or
// reset by an agent rebalancing clients across zones, a refused connect, a
// temporary Kafka error such as a moved partition leader.
//
// It has the same methods as *kafka.Writer. Create it with NewWriter; the
// zero value is not usable. Methods are safe for concurrent use.
//
// # Retries
//
// kafka-go's own retry loop is switched off (MaxAttempts 1 on the wrapped
// writer) so that one loop, with full-jitter backoff, decides: the SDK's
// retry policy (WithRetry options, AZKAFKA_RETRY_* variables; default 10
// attempts, backoff 100ms..1s). kafka.Writer's MaxAttempts, WriteBackoffMin
// and WriteBackoffMax are therefore not used.
//
// WriteMessages resends only the messages whose own error is transient; the
// others keep their error. Resends are bounded by the attempts and by ctx.
// Before resending, the Writer makes its Transport fetch fresh metadata, so
// that after a connection closed by interzone load balancing the resend
// goes to an agent of the client's own zone rather than back to the one
// that closed it (kafka-go alone would wait for its MetadataTTL, 6s).
//
// # Idempotence
//
// When RequiredAcks is kafka.RequireAll (and unless WithIdempotence(false)
// or AZKAFKA_IDEMPOTENCE=false turns it off), the Writer produces
// idempotently, as Kafka's Java producer does by default since Kafka 3.0:
// it gets a producer ID from the cluster (InitProducerId) on first use and
// numbers each partition's batches. A resend after a transient error or a
// leader change is the same batch (same producer epoch, base sequence and
// records), sent to the partition's current leader, and the broker,
// which remembers each producer's last five batches per partition,
// acknowledges a batch it already stored instead of storing it again.
// One batch per partition is in flight at a time, so each partition
// stores its messages in the order they were handed to the Writer: within
// a call, across calls made one after another, and in async mode in call
// order. Concurrent calls share batches; a synchronous call sends as soon
// as its messages are queued (BatchTimeout only paces async mode), and
// batches of partitions led by the same broker go in one request.
//
// Exactly once per partition, with these exceptions, which WriteMessages
// (or Completion) reports as errors and the Writer logs:
//
//   - a batch whose outcome stays unknown when the retry policy's attempts
//     or ctx run out (every attempt's response lost) may have been stored
//     once; its messages get the error, and the partition moves to a new
//     producer epoch before its next batch, so nothing later is refused or
//     stored twice because of it. Resending those messages yourself may
//     duplicate them;
//   - a broker that no longer knows the producer (its state expired after
//     producer.id.expiration.ms, one day by default, without writes from
//     it, or was lost with a log truncation) answers
//     UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER; the Writer then
//     bumps its epoch and resends the batch at sequence 0, which is safe
//     because the broker refused it, but a batch resent after such a loss
//     cannot be recognised as a duplicate of one stored before it;
//   - a producer fenced by a newer epoch (INVALID_PRODUCER_EPOCH,
//     PRODUCER_FENCED) fails its batch at once, never retried in a loop.
//
// With idempotence off (RequireOne, RequireNone, or turned off), the
// guarantee is at least once, as described next. An explicit
// WithIdempotence(true) or AZKAFKA_IDEMPOTENCE=true with acks other than
// RequireAll is a NewWriter error. If the cluster refuses a producer ID
// (Kafka 4.x wants IdempotentWrite on the cluster or Write on a topic):
// under auto the Writer logs one warning naming the cause and writes at
// least once; under an explicit true, WriteMessages returns the error.
// WriterStats.SDK.Idempotent says which path is in use.
//
// # Delivery without idempotence
//
// At least once; duplicates are possible. kafka-go has no idempotent
// producer: when a connection dies after the broker stored a batch but
// before its response arrived, the batch is resent and stored twice.
// With RequiredAcks RequireNone (kafka-go's default) the broker sends no
// response, so a batch lost with its connection goes unnoticed: use
// kafka.RequireOne or kafka.RequireAll (NewWriter logs a warning).
//
// Order can change on retry. A resent batch lands after the batches of
// the same partition that were sent after it and succeeded: several
// batches of one WriteMessages call (more messages for a partition than
// BatchSize or BatchBytes allow), concurrent calls sharing the Writer, and
// in async mode any later message. A balancer that does not hash the key
// (the default round-robin, LeastBytes) may also place a resent message in
// another partition. Order is kept only with a key-hashing balancer
// (kafka.Hash, kafka.Murmur2Balancer), synchronous calls made one at a
// time, each fitting one batch per partition; a duplicate then directly
// follows the batch it repeats.
type Writer struct {
	s          *session
	policy     retry.Policy
	inner      *kafka.Writer
	resender   *kafka.Writer // async mode: resends failed batches
	transport  *kafka.Transport
	async      bool
	completion func(messages []kafka.Message, err error)
	counters   counters
	logRetry   rate.Sometimes
	idem       *idempotentWriter  // nil when not idempotent
	rack       *rackAwareBalancer // nil without rack-aware partitioning

	lastRediscover atomic.Int64 // unix nanoseconds of the last rediscover

	// async mode: messages handed to the writer whose Completion has not run.
	mu          sync.Mutex
	drained     *sync.Cond
	outstanding int
	resends     sync.WaitGroup
}

// resenderBatchTimeout bounds how long a resent message waits for its
// batch to fill in async mode. Resends are rare, so latency matters more
// than batching.
const resenderBatchTimeout = 10 * time.Millisecond

// NewWriter returns a Writer configured like w, which it does not modify or
// use afterwards, with the azkafka client ID and connection policy:
//
//	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events"})
//
// w.Transport, when set, must be a *kafka.Transport: its TLS, SASL, timeouts
// and resolver are kept, its ClientID and Dial are replaced. Options win
// over AZKAFKA_* environment variables.
//
// NewWriter returns an error, rather than failing on first use, when w is
// nil, has no Addr, has an unsupported Transport, or when the configuration
// (options or environment) is invalid. It may detect the availability zone
// (once per process) unless WithAZ or AZKAFKA_AZ provides it.
func NewWriter(w *kafka.Writer, opts ...Option) (*Writer, error) {
	if w == nil {
		return nil, errors.New("sdk.NewWriter: writer is nil")
	}
	if w.Addr == nil {
		return nil, errors.New("sdk.NewWriter: kafka.Writer.Addr is nil: set it, e.g. kafka.TCP(\"broker:9092\")")
	}
	opts, err := writerOptions(w.Transport, opts)
	if err != nil {
		return nil, fmt.Errorf("sdk.NewWriter: %w", err)
	}
	s, err := newSession(context.Background(), opts)
	if err != nil {
		return nil, fmt.Errorf("sdk.NewWriter: %w", err)
	}
	idempotent, why, err := idempotenceDecision(w.RequiredAcks, s.idempotence)
	if err != nil {
		return nil, fmt.Errorf("sdk.NewWriter: %w", err)
	}
	tr := s.transport()
	sw := &Writer{
		s:          s,
		transport:  tr,
		policy:     s.retry,
		async:      w.Async,
		completion: w.Completion,
		logRetry:   rate.Sometimes{Interval: 5 * time.Second},
	}
	sw.drained = sync.NewCond(&sw.mu)
	if w.RequiredAcks == kafka.RequireNone {
		s.logger.Warn("azkafka: kafka.Writer.RequiredAcks is RequireNone (kafka-go's default): the broker does not answer produce requests, so messages lost with a connection cannot be detected or resent; set kafka.RequireOne or kafka.RequireAll",
			"topic", w.Topic)
	}
	sw.inner = cloneWriter(w, tr)
	if sw.async || sw.completion != nil {
		sw.inner.Completion = sw.complete
	}
	if sw.async {
		sw.resender = cloneWriter(w, tr)
		sw.resender.Completion = sw.complete
		sw.resender.BatchTimeout = resenderBatchTimeout
	}
	if s.rackAware {
		if s.az == "" {
			s.logger.Warn("azkafka: rack-aware partitioning is on but the AZ is unknown, so keyless messages use every partition; set AZKAFKA_AZ or sdk.WithAZ",
				"cause", s.azErr)
		}
		sw.rack = newRackAwareBalancer(w.Balancer, w.Topic, s.az)
		sw.inner.Balancer = sw.rack
		if sw.resender != nil {
			sw.resender.Balancer = sw.rack
		}
	}
	if idempotent {
		sw.idem = newIdempotentWriter(sw, w, s.idempotence.mode == idempotenceOn, why)
		if sw.rack != nil {
			sw.idem.balancer = sw.rack
		}
	}
	return sw, nil
}

// writerOptions puts the user's Transport, if any, first in opts as the
// base whose TLS, SASL, timeouts and client ID the SDK's Transport keeps.
func writerOptions(rt kafka.RoundTripper, opts []Option) ([]Option, error) {
	switch t := rt.(type) {
	case nil:
		return opts, nil
	case *kafka.Transport:
		return append([]Option{WithBaseTransport(t), withFallbackUserID(t.ClientID)}, opts...), nil
	default:
		return nil, fmt.Errorf("kafka.Writer.Transport is a %T; only a *kafka.Transport can carry the client ID and connection policy", rt)
	}
}

// cloneWriter copies the configuration fields of w into a new, unused
// kafka.Writer (copying the struct itself would copy its locks) with
// kafka-go's retries off and the given transport.
func cloneWriter(w *kafka.Writer, tr kafka.RoundTripper) *kafka.Writer {
	return &kafka.Writer{
		Addr:                   w.Addr,
		Topic:                  w.Topic,
		Balancer:               w.Balancer,
		MaxAttempts:            1,
		BatchSize:              w.BatchSize,
		BatchBytes:             w.BatchBytes,
		BatchTimeout:           w.BatchTimeout,
		ReadTimeout:            w.ReadTimeout,
		WriteTimeout:           w.WriteTimeout,
		RequiredAcks:           w.RequiredAcks,
		Async:                  w.Async,
		Compression:            w.Compression,
		Logger:                 w.Logger,
		ErrorLogger:            w.ErrorLogger,
		Transport:              tr,
		AllowAutoTopicCreation: w.AllowAutoTopicCreation,
	}
}

// WriteMessages writes msgs like kafka.Writer.WriteMessages, resending the
// messages that failed with a transient error until they are delivered, the
// retry policy's attempts run out or ctx is done.
//
// It returns nil when every message was delivered. Otherwise it returns
// either the error kafka-go returned for the whole call when that error is
// not retried (a validation error, kafka.MessageTooLargeError, ctx's error
// on the first attempt), or a kafka.WriteErrors with one entry per message
// of msgs, in the same order: nil for a delivered message, else its last
// error (wrapping the context error when ctx ended the retries), usable with
// errors.Is and errors.As.
//
// In async mode (kafka.Writer.Async) it never blocks on delivery and
// returns only validation errors, like kafka-go; resends happen in the
// background and Completion reports each message once, after its retries.
func (w *Writer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if w.rack != nil {
		w.refreshRacks(ctx, msgs)
	}
	if w.idem.active() {
		if fellBack, err := w.idem.write(ctx, msgs); !fellBack {
			return err
		}
	}
	if w.async {
		return w.writeAsync(ctx, msgs)
	}
	var slots []msgSlot
	if w.completion != nil {
		msgs, slots = track(msgs, 1)
	}
	first := w.inner.WriteMessages(ctx, msgs...)
	if first == nil {
		return nil
	}
	err := w.resend(ctx, msgs, slots, first)
	if slots != nil && handedOff(first, w.policy) {
		w.completeLeftovers(msgs, slots, err)
	}
	return err
}

// handedOff reports whether the messages of a call that failed first with
// err reached kafka-go's batches: not when kafka-go rejected the call
// up front (validation, message too large), which, as in kafka-go, is
// reported to the caller only, not to Completion.
func handedOff(err error, p retry.Policy) bool {
	_, perMessage := asWriteErrors(err, -1)
	return perMessage || p.Retryable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// resend runs the retry loop of a synchronous write whose first attempt
// failed with err. slots, when not nil, tracks the attempt of each message
// for the Completion hook.
func (w *Writer) resend(ctx context.Context, msgs []kafka.Message, slots []msgSlot, err error) error {
	werrs, perMessage := asWriteErrors(err, len(msgs))
	if !perMessage && !w.policy.Retryable(err) {
		return err // nothing was sent, or kafka-go's own whole-call error
	}
	final := make(kafka.WriteErrors, len(msgs))
	sent := msgs   // the messages of the last attempt
	var idx []int  // idx[j] is the index in msgs of sent[j]; nil means j
	var next []int // indexes in msgs to resend
	attempts := w.policy.Attempts()
	for attempt := 1; ; attempt++ {
		next = next[:0:0]
		for j := range sent {
			i := j
			if idx != nil {
				i = idx[j]
			}
			e := err
			if perMessage {
				e = werrs[j]
			}
			final[i] = e
			if e != nil && w.policy.Retryable(e) {
				next = append(next, i)
			}
		}
		if len(next) == 0 {
			break
		}
		w.counters.transient.Add(1)
		if attempt >= attempts {
			for _, i := range next {
				final[i] = fmt.Errorf("sdk: gave up after %d attempts: %w", attempt, final[i])
			}
			break
		}
		if serr := w.policy.Sleep(ctx, attempt-1); serr != nil {
			for _, i := range next {
				final[i] = fmt.Errorf("%w (not resent: %w)", final[i], serr)
			}
			break
		}
		w.rediscover(!perMessage)
		resent := make([]kafka.Message, len(next))
		for j, i := range next {
			resent[j] = msgs[i]
			if slots != nil {
				slots[i].attempt.Store(int32(attempt + 1))
			}
		}
		w.counters.retries.Add(1)
		w.counters.resent.Add(int64(len(resent)))
		w.logResend(len(resent), attempt+1, attempts, final[next[0]])
		sent, idx = resent, next
		err = w.inner.WriteMessages(ctx, sent...)
		if err == nil {
			for _, i := range idx {
				final[i] = nil
			}
			break
		}
		werrs, perMessage = asWriteErrors(err, len(sent))
	}
	if final.Count() == 0 {
		return nil
	}
	return final
}

// rediscover makes the next request fetch fresh metadata by dropping the
// Transport's connection pools; requests in flight finish on the old ones.
//
// It runs after every transient failure, before the resend. A connection
// closed by an agent that moves clients to their own zone, a refused
// connect or a moved leader all mean the cached brokers may be wrong, and
// kafka-go would keep them until its MetadataTTL (default 6s) expires:
// resends would go back to the agent that just closed the connection. The
// cost is one Metadata request per rediscovery.
//
// lookupFailed says the write failed before any produce, in kafka-go's
// metadata lookup: kafka-go caches a failed first fetch for MetadataTTL
// too, so the pools are always dropped then. The idempotent path also
// passes true when a broker answered that it does not lead a partition:
// the cached leaders are known wrong, and its resend must not wait. Otherwise at most once per
// rediscoverInterval, however many calls fail together.
func (w *Writer) rediscover(lookupFailed bool) {
	now := time.Now().UnixNano()
	last := w.lastRediscover.Load()
	if !lookupFailed && (now-last < int64(rediscoverInterval) || !w.lastRediscover.CompareAndSwap(last, now)) {
		return
	}
	w.lastRediscover.Store(now)
	w.transport.CloseIdleConnections()
}

// rediscoverInterval bounds how often produce failures drop the pools.
const rediscoverInterval = time.Second

func (w *Writer) logResend(n, attempt, attempts int, cause error) {
	w.logRetry.Do(func() {
		w.s.logger.Info("azkafka: resending messages after a transient error",
			"messages", n, "attempt", attempt, "max_attempts", attempts, "error", cause)
	})
}

// asWriteErrors returns err as per-message errors when it is a
// kafka.WriteErrors aligned with n messages (any length when n < 0).
func asWriteErrors(err error, n int) (kafka.WriteErrors, bool) {
	var we kafka.WriteErrors
	if errors.As(err, &we) && (len(we) == n || n < 0) {
		return we, true
	}
	return nil, false
}

// msgSlot is what a tracked message carries in WriterData while the SDK
// owns it: the caller's WriterData, the attempt it is on and whether the
// caller's Completion has seen it.
type msgSlot struct {
	user     any
	attempt  atomic.Int32
	reported atomic.Bool
}

// track copies msgs, pointing each copy's WriterData at its slot.
func track(msgs []kafka.Message, attempt int32) ([]kafka.Message, []msgSlot) {
	tracked := make([]kafka.Message, len(msgs))
	slots := make([]msgSlot, len(msgs))
	for i := range msgs {
		tracked[i] = msgs[i]
		slots[i].user = msgs[i].WriterData
		slots[i].attempt.Store(attempt)
		tracked[i].WriterData = &slots[i]
	}
	return tracked, slots
}

func (w *Writer) writeAsync(ctx context.Context, msgs []kafka.Message) error {
	if len(msgs) == 0 {
		return w.inner.WriteMessages(ctx)
	}
	tracked, _ := track(msgs, 1)
	w.addOutstanding(len(tracked))
	// kafka-go validates every message and looks the topic's partitions up
	// before queueing any, so an error here means none of them was queued.
	// The lookup can fail on a closed connection: that is retried here,
	// blocking the caller for the backoff.
	err := w.policy.Do(ctx, func(ctx context.Context) error {
		err := w.inner.WriteMessages(ctx, tracked...)
		if err != nil && w.policy.Retryable(err) {
			w.counters.transient.Add(1)
			w.counters.retries.Add(1)
			w.rediscover(true)
		}
		return err
	})
	if err != nil {
		w.addOutstanding(-len(tracked))
		return err
	}
	return nil
}

func (w *Writer) addOutstanding(n int) {
	w.mu.Lock()
	w.outstanding += n
	if w.outstanding == 0 {
		w.drained.Broadcast()
	}
	w.mu.Unlock()
}

// complete is the Completion hook of the wrapped writers. kafka-go calls it
// once per batch attempt; it reports to the caller's Completion only the
// messages whose outcome is final, and in async mode resends the others.
func (w *Writer) complete(batch []kafka.Message, err error) {
	attempts := int32(w.policy.Attempts())
	retryable := err != nil && w.policy.Retryable(err)
	// report reuses batch's array: kafka-go does not read the batch after
	// Completion returns, and the common case (success) then allocates
	// nothing.
	report := batch[:0]
	var again []kafka.Message
	maxAttempt := int32(0)
	for i := range batch {
		m := batch[i]
		slot, ok := m.WriterData.(*msgSlot)
		if !ok {
			report = append(report, m)
			continue
		}
		if a := slot.attempt.Load(); retryable && a < attempts {
			// In sync mode WriteMessages resends it; in async mode, we do.
			if w.async {
				again = append(again, m)
				maxAttempt = max(maxAttempt, a)
			}
			continue
		}
		if slot.reported.CompareAndSwap(false, true) {
			m.WriterData = slot.user
			report = append(report, m)
		}
	}
	if len(again) > 0 {
		w.resendAsync(again, maxAttempt, err)
	}
	if len(report) > 0 {
		if w.completion != nil {
			w.completion(report, err)
		}
		if w.async {
			w.addOutstanding(-len(report))
		}
	}
}

// resendAsync resends, after a backoff, messages of a batch that failed
// with a transient error.
func (w *Writer) resendAsync(msgs []kafka.Message, attempt int32, cause error) {
	for i := range msgs {
		msgs[i].WriterData.(*msgSlot).attempt.Add(1)
		if w.resender.Topic != "" {
			msgs[i].Topic = "" // kafka-go set it on a Kafka error response
		}
		msgs[i].Partition, msgs[i].Offset = 0, 0
	}
	w.counters.transient.Add(1)
	w.counters.retries.Add(1)
	w.counters.resent.Add(int64(len(msgs)))
	w.logResend(len(msgs), int(attempt)+1, w.policy.Attempts(), cause)
	w.resends.Add(1)
	go func() {
		defer w.resends.Done()
		ctx := context.Background()
		_ = w.policy.Sleep(ctx, int(attempt)-1)
		w.rediscover(false)
		// Queueing fails only up front (see writeAsync); a transient
		// failure there, such as a closed connection during the partition
		// lookup, costs an attempt too.
		for a := attempt + 1; ; a++ {
			err := w.resender.WriteMessages(ctx, msgs...)
			if err == nil {
				return
			}
			if !w.policy.Retryable(err) || int(a) >= w.policy.Attempts() {
				w.finish(msgs, fmt.Errorf("sdk: resending: %w", err))
				return
			}
			w.counters.transient.Add(1)
			_ = w.policy.Sleep(ctx, int(a)-1)
			w.rediscover(true)
		}
	}()
}

// finish reports tracked messages as final with err.
func (w *Writer) finish(msgs []kafka.Message, err error) {
	report := msgs[:0:0]
	for _, m := range msgs {
		slot := m.WriterData.(*msgSlot)
		if slot.reported.CompareAndSwap(false, true) {
			m.WriterData = slot.user
			report = append(report, m)
		}
	}
	if len(report) == 0 {
		return
	}
	if w.completion != nil {
		w.completion(report, err)
	}
	if w.async {
		w.addOutstanding(-len(report))
	}
}

// completeLeftovers reports, in sync mode, the messages whose Completion
// was held back for a resend that did not happen (ctx ended, attempts ran
// out on a whole-call error), with their final error.
func (w *Writer) completeLeftovers(msgs []kafka.Message, slots []msgSlot, err error) {
	werrs, perMessage := asWriteErrors(err, len(msgs))
	for i := range msgs {
		if slots[i].reported.Load() {
			continue
		}
		e := err
		if perMessage {
			e = werrs[i]
		}
		w.finish(msgs[i:i+1], e)
	}
}

// Close flushes pending messages and waits until every message handed to
// WriteMessages was delivered or failed for good, which in async mode
// includes resends: at most the retry policy's attempts times (backoff max
// plus kafka.Writer.WriteTimeout). Later calls to WriteMessages fail with
// io.ErrClosedPipe.
func (w *Writer) Close() error {
	if w.idem != nil {
		w.idem.closed.Store(true)
		w.idem.q.close()
	}
	err := w.inner.Close()
	if w.async {
		w.mu.Lock()
		for w.outstanding > 0 {
			w.drained.Wait()
		}
		w.mu.Unlock()
		w.resends.Wait()
		if rerr := w.resender.Close(); err == nil {
			err = rerr
		}
	}
	w.s.closeIdle()
	return err
}

// Stats returns kafka-go's writer statistics since the previous call, plus
// the SDK's counters (see SDKStats). In async mode the resends' writes are
// included in Writes, Messages, Bytes and Errors.
func (w *Writer) Stats() WriterStats {
	st := WriterStats{WriterStats: w.inner.Stats()}
	if w.resender != nil {
		r := w.resender.Stats()
		st.Writes += r.Writes
		st.Messages += r.Messages
		st.Bytes += r.Bytes
		st.Errors += r.Errors
		st.Dials += r.Dials
	}
	st.SDK = w.counters.snapshot(w.s)
	if w.idem != nil {
		w.idem.stats(&st)
	} else {
		st.SDK.ProducerID, st.SDK.ProducerEpoch = -1, -1
	}
	st.MaxAttempts = int64(w.policy.Attempts())
	st.Retries = st.SDK.Retries
	return st
}
