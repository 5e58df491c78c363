package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	metaAPI "github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/azkafka/azkafka/sdk/internal/produce"
)

// Defaults of kafka.Writer that the idempotent path applies the same way.
const (
	defaultBatchSize    = 100
	defaultBatchBytes   = 1048576
	defaultBatchTimeout = time.Second
	defaultWriteTimeout = 10 * time.Second
)

// idempotentWriter is the Writer's idempotent produce path: it assigns
// partitions like kafka.Writer, cuts batches, and hands them to a
// produce.Producer, which keeps one batch in flight per partition and
// resends the same batch after a transient error.
type idempotentWriter struct {
	w            *Writer
	p            *produce.Producer
	topic        string
	balancer     kafka.Balancer
	batchSize    int
	batchBytes   int
	batchTimeout time.Duration
	timeout      time.Duration // WriteTimeout: bounds each attempt
	allowCreate  bool
	completion   func([]kafka.Message, error)
	// explicit: idempotence was asked for (WithIdempotence(true) or the
	// variable), so a refused producer ID is an error, never a fallback.
	explicit bool
	source   string

	// fallback is set, under auto, once the cluster refused a producer
	// ID: the Writer then uses the at-least-once path.
	fallback atomic.Bool
	closed   atomic.Bool

	statsMu sync.Mutex
	last    produce.Stats // the producer's counters at the previous Stats
	errors  atomic.Int64  // messages that failed, since the previous Stats

	async bool
	q     *queue
}

func newIdempotentWriter(sw *Writer, w *kafka.Writer, explicit bool, source string) *idempotentWriter {
	iw := &idempotentWriter{
		w:            sw,
		topic:        w.Topic,
		balancer:     w.Balancer,
		batchSize:    w.BatchSize,
		batchBytes:   int(w.BatchBytes),
		batchTimeout: w.BatchTimeout,
		allowCreate:  w.AllowAutoTopicCreation,
		completion:   w.Completion,
		explicit:     explicit,
		source:       source,
	}
	if iw.balancer == nil {
		iw.balancer = &kafka.RoundRobin{}
	}
	if iw.batchSize <= 0 {
		iw.batchSize = defaultBatchSize
	}
	if iw.batchBytes <= 0 {
		iw.batchBytes = defaultBatchBytes
	}
	if iw.batchTimeout <= 0 {
		iw.batchTimeout = defaultBatchTimeout
	}
	timeout := w.WriteTimeout
	if timeout <= 0 {
		timeout = defaultWriteTimeout
	}
	iw.timeout = timeout
	iw.p = produce.New(produce.Config{
		Transport:   sw.transport,
		Addr:        w.Addr,
		Compression: w.Compression,
		Timeout:     timeout,
		Policy:      sw.policy,
		Rediscover:  sw.rediscover,
	})
	iw.async = w.Async
	iw.q = newQueue(iw)
	return iw
}

// active reports whether writes take the idempotent path.
func (iw *idempotentWriter) active() bool { return iw != nil && !iw.fallback.Load() }

// init gets the producer ID, retrying transient failures. It returns
// fellBack when, under auto, the cluster refused and the Writer switched
// to the at-least-once path.
func (iw *idempotentWriter) init(ctx context.Context) (fellBack bool, err error) {
	policy := iw.w.policy
	shouldRetry := policy.Retryable
	policy.ShouldRetry = func(err error) bool {
		// kafka-go's Transport answers BrokerNotAvailable when it has no
		// connection to the broker it picked yet: retried like a close.
		return shouldRetry(err) || errors.Is(err, kafka.BrokerNotAvailable) || errors.Is(err, errInitAttemptTimeout)
	}
	err = policy.Do(ctx, func(ctx context.Context) error {
		// Each attempt is bounded like a produce attempt, so that a
		// connection gone silent costs an attempt, not the caller's
		// whole deadline (or, with an async Writer's background ctx,
		// every write forever).
		actx, cancel := context.WithTimeoutCause(ctx, iw.timeout, errInitAttemptTimeout)
		defer cancel()
		err := iw.p.Init(actx)
		// kafka-go puts actx's deadline on the socket too, so the
		// attempt may end with an i/o timeout just before actx does.
		dl, _ := actx.Deadline()
		if err != nil && ctx.Err() == nil && (actx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(dl)) {
			err = fmt.Errorf("%w: %w", errInitAttemptTimeout, err)
		}
		if err != nil && policy.Retryable(err) {
			iw.w.counters.transient.Add(1)
			iw.w.counters.retries.Add(1)
			iw.w.rediscover(true)
		}
		return err
	})
	if err == nil {
		return false, nil
	}
	if !refusesProducerID(err) {
		return false, fmt.Errorf("sdk: getting a producer ID: %w", err)
	}
	if iw.explicit {
		return false, fmt.Errorf("sdk: idempotence is on (%s) but the cluster refused a producer ID: %w; grant IdempotentWrite on the cluster (or Write on the topic), or turn idempotence off", iw.source, err)
	}
	if iw.fallback.CompareAndSwap(false, true) {
		iw.w.s.logger.Warn("azkafka: the cluster refused a producer ID, so this Writer is not idempotent: a resend after a lost response may store messages twice; grant IdempotentWrite on the cluster (or Write on the topic), or set "+EnvIdempotence+"=false to silence this",
			"error", err)
	}
	return true, nil
}

// errInitAttemptTimeout is the error of an InitProducerId attempt that got
// no answer within the Writer's WriteTimeout; it is retried.
var errInitAttemptTimeout = errors.New("no answer within WriteTimeout")

// refusesProducerID reports whether err is the cluster's answer that it
// gives this client no producer ID: not authorized (Kafka 4.x wants
// IdempotentWrite on the cluster or Write on a topic), or not supported.
// Connection errors and timeouts are not: they say nothing about the
// cluster's will.
func refusesProducerID(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kafka.ClusterAuthorizationFailed, kafka.TopicAuthorizationFailed, kafka.TransactionalIDAuthorizationFailed,
		kafka.UnsupportedVersion, kafka.UnsupportedForMessageFormat, kafka.InvalidRequest:
		return true
	}
	return false
}

// assigned is the topic and partition of a message.
type assigned struct {
	topic     string
	partition int
}

// assign picks each message's topic and partition as kafka.Writer does:
// the Writer's Topic or the message's (exactly one of them), and the
// Balancer over the topic's partitions. Looking the partitions up is
// retried on transient errors.
func (iw *idempotentWriter) assign(ctx context.Context, msgs []kafka.Message) ([]assigned, error) {
	out := make([]assigned, len(msgs))
	var counts map[string]int
	var parts []int
	for i := range msgs {
		topic := msgs[i].Topic
		switch {
		case iw.topic != "" && topic != "":
			return nil, errors.New("kafka.(*Writer): Topic must not be specified for both Writer and Message")
		case iw.topic == "" && topic == "":
			return nil, errors.New("kafka.(*Writer): Topic must be specified for Writer or Message")
		case topic == "":
			topic = iw.topic
		}
		n, ok := counts[topic]
		if !ok {
			var err error
			n, err = iw.partitions(ctx, topic)
			if err != nil {
				return nil, err
			}
			if counts == nil {
				counts = make(map[string]int, 1)
			}
			counts[topic] = n
		}
		for len(parts) < n {
			parts = append(parts, len(parts))
		}
		out[i] = assigned{topic, iw.balancer.Balance(msgs[i], parts[:n]...)}
	}
	return out, nil
}

// partitions returns the number of partitions of topic from the
// Transport's cached metadata, as kafka.Writer does.
func (iw *idempotentWriter) partitions(ctx context.Context, topic string) (int, error) {
	var n int
	err := iw.w.policy.Do(ctx, func(ctx context.Context) error {
		r, err := iw.w.transport.RoundTrip(ctx, iw.w.inner.Addr, &metaAPI.Request{
			TopicNames:             []string{topic},
			AllowAutoTopicCreation: iw.allowCreate,
		})
		if err == nil {
			err = kafka.UnknownTopicOrPartition
			for _, t := range r.(*metaAPI.Response).Topics {
				if t.Name == topic {
					err = nil
					if t.ErrorCode != 0 {
						err = kafka.Error(t.ErrorCode)
					}
					n = len(t.Partitions)
				}
			}
		}
		if err != nil && iw.w.policy.Retryable(err) {
			iw.w.counters.transient.Add(1)
			iw.w.counters.retries.Add(1)
			iw.w.rediscover(true)
		}
		return err
	})
	return n, err
}

// checkSizes returns kafka.MessageTooLargeError for the first message that
// cannot fit a batch of BatchBytes, as kafka.Writer does.
func (iw *idempotentWriter) checkSizes(msgs []kafka.Message) error {
	for i := range msgs {
		if produce.RecordSize(&msgs[i])+produce.BatchOverhead > iw.batchBytes {
			rest := make([]kafka.Message, 0, len(msgs)-1)
			rest = append(append(rest, msgs[:i]...), msgs[i+1:]...)
			return kafka.MessageTooLargeError{Message: msgs[i], Remaining: rest}
		}
	}
	return nil
}

// write is WriteMessages on the idempotent path. fellBack reports that
// the cluster refused a producer ID under auto: the caller writes msgs on
// the at-least-once path instead.
//
// The messages join their partitions' queues in call order. A synchronous
// call then waits for their outcome; its partitions are flushed at once
// (messages of concurrent calls waiting in the same queues ride along),
// while in async mode a queue is flushed when it holds BatchSize messages
// or BatchBytes, or its oldest message waited BatchTimeout.
//
// When a synchronous call's ctx ends first, its messages still waiting in
// the queues are never sent, it waits for its batches already in flight
// (their resends stop): each message's error in the kafka.WriteErrors
// wraps the ctx's error.
func (iw *idempotentWriter) write(ctx context.Context, msgs []kafka.Message) (fellBack bool, err error) {
	if iw.closed.Load() {
		return false, io.ErrClosedPipe
	}
	if len(msgs) == 0 {
		return false, nil
	}
	if err := iw.checkSizes(msgs); err != nil {
		return false, err
	}
	if fellBack, err := iw.init(ctx); fellBack || err != nil {
		return fellBack, err
	}
	where, err := iw.assign(ctx, msgs)
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err // nothing queued
	}
	var c *call
	if !iw.async {
		c = &call{ctx: ctx, n: len(msgs), remaining: len(msgs), done: make(chan struct{})}
	}
	if err := iw.q.enqueue(msgs, where, c); err != nil {
		return false, err
	}
	if c == nil {
		return false, nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		// Messages still waiting in their queues are never sent; those
		// in flight end soon: the flight stops resending once every
		// call in it has seen its ctx end.
		iw.q.withdraw(c)
		<-c.done
	}
	if c.errs == nil {
		return false, nil
	}
	return false, c.errs
}

// cut returns how many of msgs form the next batch: at most BatchSize
// messages and BatchBytes bytes, at least one.
func (iw *idempotentWriter) cut(msgs []kafka.Message) int {
	size := produce.BatchOverhead
	for n := range msgs {
		size += produce.RecordSize(&msgs[n])
		if n == iw.batchSize || (n > 0 && size > iw.batchBytes) {
			return n
		}
	}
	return len(msgs)
}

// report counts b's outcome and hands it to Completion.
func (iw *idempotentWriter) report(b *produce.Batch) {
	if b.Err != nil {
		iw.errors.Add(int64(len(b.Messages)))
		if b.Ambiguous {
			iw.w.logRetry.Do(func() {
				iw.w.s.logger.Warn("azkafka: gave up on a batch whose outcome is unknown: it may be stored once; the partition moves to a new producer epoch before its next batch",
					"topic", b.Topic, "partition", b.Partition, "messages", len(b.Messages), "attempts", b.Attempts, "error", b.Err)
			})
		}
	}
	if iw.completion == nil {
		return
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		m.Topic, m.Partition = b.Topic, b.Partition
		if b.Err == nil && b.BaseOffset >= 0 {
			m.Offset = b.BaseOffset + int64(i)
		}
	}
	if iw.topic != "" {
		for i := range b.Messages {
			b.Messages[i].Topic = "" // as handed in: the Writer's Topic
		}
	}
	iw.completion(b.Messages, b.Err)
}

// stats fills the kafka-go counters of st from the producer's, since the
// previous call, and the SDK's idempotence fields.
func (iw *idempotentWriter) stats(st *WriterStats) {
	iw.statsMu.Lock()
	cur := iw.p.Stats()
	prev := iw.last
	iw.last = cur
	iw.statsMu.Unlock()
	st.Writes += cur.Requests - prev.Requests
	st.Messages += cur.Messages - prev.Messages
	st.Bytes += cur.Bytes - prev.Bytes
	st.Errors += iw.errors.Swap(0)
	st.SDK.Idempotent = iw.active()
	st.SDK.ProducerID = cur.ProducerID
	st.SDK.ProducerEpoch = cur.ProducerEpoch
	st.SDK.EpochBumps = cur.EpochBumps - prev.EpochBumps
	st.SDK.DuplicateBatches = cur.DuplicateBatches - prev.DuplicateBatches
	st.SDK.BatchesResent = cur.BatchesResent - prev.BatchesResent
	st.SDK.Retries += cur.Rounds - prev.Rounds
	st.SDK.TransientErrors += cur.Rounds - prev.Rounds
	st.SDK.MessagesResent += cur.MessagesResent - prev.MessagesResent
}

// queue holds the Writer's messages per partition, in the order they
// were handed over, and flushes each partition's next batch, with at most
// one batch per partition in flight; batches flushed together share one
// Produce request per broker.
type queue struct {
	iw      *idempotentWriter
	mu      sync.Mutex
	parts   map[assigned]*pendingPart
	flying  int // batches in flight
	closing bool
	kick    chan struct{}
	done    chan struct{}

	// Test hooks, nil outside tests; called with mu held.
	testEnqueued  func(ctx context.Context) // a sync call's messages joined the queues
	testWithdrawn func(c *call)             // a sync call's waiting messages were withdrawn
}

type pendingPart struct {
	msgs  []kafka.Message
	calls []callRef // sync mode: whose message each one is
	bytes int
	since time.Time // when the oldest waiting message arrived
	busy  bool      // a batch of this partition is in flight
}

// call is a synchronous WriteMessages waiting for its messages.
type call struct {
	ctx       context.Context
	n         int               // messages in the call
	remaining int               // guarded by queue.mu
	errs      kafka.WriteErrors // guarded by queue.mu; nil while all succeed
	done      chan struct{}
}

type callRef struct {
	c   *call
	idx int // index of the message in the call
}

func newQueue(iw *idempotentWriter) *queue {
	q := &queue{iw: iw, parts: make(map[assigned]*pendingPart), kick: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

// enqueue appends msgs (copied: the caller may reuse them) to their
// partitions' queues; c is the waiting call, nil in async mode.
func (q *queue) enqueue(msgs []kafka.Message, where []assigned, c *call) error {
	now := time.Now()
	full := c != nil // wake the loop: a sync call, a new deadline or a full batch
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return io.ErrClosedPipe
	}
	for i, a := range where {
		pp := q.parts[a]
		if pp == nil {
			pp = &pendingPart{}
			q.parts[a] = pp
		}
		if len(pp.msgs) == 0 {
			// The partition's BatchTimeout starts now: the loop must
			// learn of it, or an idle loop would sleep past it.
			pp.since = now
			full = true
		}
		pp.msgs = append(pp.msgs, msgs[i])
		if c != nil {
			pp.calls = append(pp.calls, callRef{c, i})
		}
		pp.bytes += produce.RecordSize(&msgs[i])
		full = full || len(pp.msgs) >= q.iw.batchSize || pp.bytes+produce.BatchOverhead >= q.iw.batchBytes
	}
	if q.testEnqueued != nil && c != nil {
		q.testEnqueued(c.ctx)
	}
	q.mu.Unlock()
	if full {
		q.wake()
	}
	return nil
}

// withdraw takes c's messages that wait in their queues, not yet in a
// batch, out of them: they fail with c's ctx error and are never sent.
func (q *queue) withdraw(c *call) {
	err := c.ctx.Err()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, pp := range q.parts {
		if !slices.ContainsFunc(pp.calls, func(r callRef) bool { return r.c == c }) {
			continue
		}
		var msgs []kafka.Message
		var calls []callRef
		for i, r := range pp.calls {
			if r.c != c {
				msgs, calls = append(msgs, pp.msgs[i]), append(calls, r)
				continue
			}
			pp.bytes -= produce.RecordSize(&pp.msgs[i])
			if c.errs == nil {
				c.errs = make(kafka.WriteErrors, c.n)
			}
			c.errs[r.idx] = fmt.Errorf("sdk: message not sent: the call's ctx ended while it waited in its partition's queue: %w", err)
			if c.remaining--; c.remaining == 0 {
				close(c.done)
			}
		}
		pp.msgs, pp.calls = msgs, calls
	}
	if q.testWithdrawn != nil {
		q.testWithdrawn(c)
	}
}

func (q *queue) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// flight is a set of batches flushed together.
type flight struct {
	batches []*produce.Batch
	calls   [][]callRef // per batch, sync mode
}

func (q *queue) loop() {
	defer close(q.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	syncMode := !q.iw.async
	for {
		q.mu.Lock()
		now := time.Now()
		wait := time.Duration(-1)
		var f flight
		empty := true
		for key, pp := range q.parts {
			if len(pp.msgs) == 0 {
				continue
			}
			empty = false
			if pp.busy {
				continue
			}
			full := len(pp.msgs) >= q.iw.batchSize || pp.bytes+produce.BatchOverhead >= q.iw.batchBytes
			if due := pp.since.Add(q.iw.batchTimeout); !syncMode && !full && !q.closing && now.Before(due) {
				if d := due.Sub(now); wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			n := q.iw.cut(pp.msgs)
			batch := &produce.Batch{Topic: key.topic, Partition: key.partition, Messages: pp.msgs[:n:n]}
			pp.msgs = pp.msgs[n:]
			for i := range batch.Messages {
				pp.bytes -= produce.RecordSize(&batch.Messages[i])
			}
			if syncMode {
				f.calls = append(f.calls, pp.calls[:n:n])
				pp.calls = pp.calls[n:]
			}
			if len(pp.msgs) == 0 {
				// Let the arrays go: a long-lived partition queue
				// would otherwise keep its high-water mark.
				pp.msgs, pp.calls = nil, nil
			}
			pp.since = now
			pp.busy = true
			f.batches = append(f.batches, batch)
		}
		if len(f.batches) == 0 && empty && q.flying == 0 && q.closing {
			q.mu.Unlock()
			return
		}
		q.flying += len(f.batches)
		q.mu.Unlock()
		if len(f.batches) > 0 {
			go q.flush(f)
		}
		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-q.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// flush produces one flight and reports each batch as soon as its
// outcome is known. In sync mode its resends stop once every call with a
// message in it has seen its ctx end.
func (q *queue) flush(f flight) {
	ctx := context.Background()
	if f.calls != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		// live starts at 1 so that a call whose ctx is already done
		// (its AfterFunc runs at once) cannot cancel the flight before
		// the other calls are counted.
		var live atomic.Int64
		live.Store(1)
		seen := make(map[*call]bool)
		var stops []func() bool
		for _, refs := range f.calls {
			for _, r := range refs {
				if seen[r.c] {
					continue
				}
				seen[r.c] = true
				live.Add(1)
				stops = append(stops, context.AfterFunc(r.c.ctx, func() {
					if live.Add(-1) == 0 {
						cancel()
					}
				}))
			}
		}
		if live.Add(-1) == 0 {
			cancel()
		}
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
	}
	index := make(map[*produce.Batch]int, len(f.batches))
	for i, b := range f.batches {
		index[b] = i
	}
	if err := q.iw.p.ProduceEach(ctx, f.batches, func(b *produce.Batch) { q.settle(f, index[b], b) }); err != nil {
		for i, b := range f.batches {
			b.Err = err
			q.settle(f, i, b)
		}
	}
}

// settle reports batch i of f, frees its partition for the next batch and
// settles its messages' calls.
func (q *queue) settle(f flight, i int, b *produce.Batch) {
	q.iw.report(b)
	b.Release()
	q.mu.Lock()
	key := assigned{b.Topic, b.Partition}
	pp := q.parts[key]
	pp.busy = false
	if len(pp.msgs) == 0 {
		delete(q.parts, key) // a Writer over many partitions keeps only the ones in use
	}
	if f.calls != nil {
		for _, r := range f.calls[i] {
			c := r.c
			if b.Err != nil {
				if c.errs == nil {
					c.errs = make(kafka.WriteErrors, c.n)
				}
				c.errs[r.idx] = callError(c, b.Err)
			}
			if c.remaining--; c.remaining == 0 {
				close(c.done)
			}
		}
	}
	q.flying--
	q.mu.Unlock()
	q.wake()
}

// callError is err for a message of c; when c's ctx ended, which stopped
// the resends, the error says so too.
func callError(c *call, err error) error {
	if cerr := c.ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// close flushes every waiting message and returns once all were reported.
func (q *queue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.wake()
	<-q.done
}

// idempotenceDecision says whether a Writer configured with acks and
// setting is idempotent, and why; err is the NewWriter error for an
// explicit on with acks other than all.
func idempotenceDecision(acks kafka.RequiredAcks, setting idempotence) (on bool, why string, err error) {
	switch setting.mode {
	case idempotenceOff:
		return false, setting.source, nil
	case idempotenceOn:
		if acks != kafka.RequireAll {
			return false, "", fmt.Errorf("%s needs kafka.Writer.RequiredAcks = kafka.RequireAll (it is %s): set RequiredAcks to kafka.RequireAll, or turn idempotence off",
				setting.source, acksName(acks))
		}
		return true, setting.source, nil
	}
	if acks == kafka.RequireAll {
		return true, "auto: RequiredAcks is RequireAll", nil
	}
	return false, "auto: RequiredAcks is " + acksName(acks) + ", not RequireAll", nil
}

func acksName(acks kafka.RequiredAcks) string {
	switch acks {
	case kafka.RequireAll:
		return "RequireAll"
	case kafka.RequireOne:
		return "RequireOne"
	case kafka.RequireNone:
		return "RequireNone (kafka-go's default)"
	}
	return fmt.Sprintf("RequiredAcks(%d)", int(acks))
}
