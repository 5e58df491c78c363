package sdk

// writer_call.go holds one WriteMessages call from hand-over to outcome:
// kafka-go's checks (sizes, topics known to the cluster), the Balancer run
// in message order, each message as a record with its delivery budget,
// the engine's promise per record, the call's result (nil, kafka-go's
// call-level errors, kafka.WriteErrors, ctx's error) and Completion per
// call and partition. It pairs with writer.go (the Writer and its
// engine) and budget.go (the records' budget Contexts).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// call is one WriteMessages: its messages, their records and outcomes,
// and, when they are reported, the grouping per partition.
type call struct {
	w    *Writer
	msgs []kafka.Message // what balancers and Completion see
	// msgsMu guards msgs where it is read after the caller may have
	// returned (the partitioner choosing late, Completion): a
	// synchronous call that returns before its messages' outcome
	// (its ctx ended) swaps in a copy, since its caller may then reuse
	// the slice, as kafka-go's callers may.
	msgsMu  sync.Mutex
	slots   []slot
	one     [1]slot // slots of a call of one message, in the call's allocation
	pending atomic.Int64
	done    chan struct{} // closed when every message has its outcome
	report  bool          // Completion or async: report per partition
	// settled: Close no longer waits for the call (its messages have
	// their outcome, or it returned without them).
	settled atomic.Bool

	mu     sync.Mutex
	queued bool                // every record was handed to the engine
	groups map[batchKey]*group // by topic and partition
	// failedIn: the partitions where a message of the synchronous call
	// failed (Stats.Errors counts each once, as kafka-go counts a failed
	// batch).
	failedIn []batchKey
}

type slot struct {
	rec kgo.Record
	st  recState
}

// recState is a record's link to its call, carried as the record's
// Context (which the engine only passes along).
type recState struct {
	context.Context
	c         *call
	i         int
	partition int32 // -1 until the balancer chose
	pre       int32 // the partition WriteMessages chose, -1 for none
	preN      int32 // the partition count pre (or refused) was chosen among
	// last is the partitioner's last answer, among lastN partitions: a
	// record the engine partitions again (a resend) keeps it.
	last, lastN int32
	err         error
	fin         atomic.Bool // err is final
	resends     int         // times resent after a broker found its batch corrupt
	cl          *kgo.Client // the client the record was last produced on
	lane        *lane       // the gather lane it went through, if any
	pin         *pinned     // its partition's pin to lane
	// refused: the Balancer, run at hand-over with the topic's partition
	// count, chose no partition of it (the engine fails the record
	// without running the Balancer again).
	refused bool
}

// group is the messages of a call in one partition.
type group struct {
	assigned int
	done     []int
}

// WriteMessages writes msgs like kafka.Writer.WriteMessages (see Writer for
// what it returns and when).
func (w *Writer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if w.closed.Load() {
		return io.ErrClosedPipe
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := w.validate(ctx, msgs); err != nil {
		return err
	}
	// Close waits for the calls counted in outstanding: none may be
	// added once it began.
	w.closeMu.RLock()
	if w.closed.Load() {
		w.closeMu.RUnlock()
		return io.ErrClosedPipe
	}
	w.outstanding.Add(1)
	w.awaited.Add(1)
	w.closeMu.RUnlock()
	if w.rack != nil {
		w.refreshRacks(ctx, msgs)
	}
	c := &call{w: w, msgs: msgs, report: w.async || w.completion != nil}
	if w.async {
		c.msgs = slices.Clone(msgs) // the caller may reuse msgs
	} else {
		c.done = make(chan struct{})
	}
	if len(msgs) == 1 {
		c.slots = c.one[:]
	} else {
		c.slots = make([]slot, len(msgs))
	}
	c.pending.Store(int64(len(msgs)))
	mark := w.hooks.errSeq.Load()
	w.fatalMu.Lock()
	fatal := w.fatalCh
	w.fatalMu.Unlock()
	w.handOverOrRelease(ctx, c)
	if c.report {
		c.markQueued()
	}
	if w.async {
		return nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		c.detach()
	case <-fatal:
		c.detach()
	}
	w.settle(c)
	return w.outcome(ctx, c, mark)
}

// detach makes c's messages its own, before its caller returns without
// their outcome.
func (c *call) detach() {
	select {
	case <-c.done:
		return // every outcome is in: nothing reads msgs any more
	default:
	}
	c.msgsMu.Lock()
	c.msgs = slices.Clone(c.msgs)
	c.msgsMu.Unlock()
}

// handOverOrRelease makes each message of c a record and hands it to the
// engine (handOver), its partition chosen by the Balancer and its delivery
// budget starting now. When the Balancer panics, which happens before any
// record reaches the engine (it runs first, in the caller's goroutine, as
// in kafka-go), the call is released, so that Close does not wait for it,
// and the panic goes on to the caller.
func (w *Writer) handOverOrRelease(ctx context.Context, c *call) {
	cl := w.engine()
	balanced := false
	defer func() {
		if !balanced {
			w.settle(c)
			w.outstanding.Done()
		}
	}()
	w.prepare(c, cl)
	balanced = true
	w.unsettled.Add(int64(len(c.slots)))
	w.handOver(ctx, c, cl)
}

// prepare makes each message of c a record, its partition chosen by the
// Balancer when the topic's partitions are known.
func (w *Writer) prepare(c *call, cl *kgo.Client) {
	// One clock read per call (kafka-go reads it once per batch), not one
	// per message in the engine: the write time of messages without a
	// Time, and the start of every message's delivery budget.
	now := time.Now()
	budget := w.budget.ctx(now)
	var b kafka.Balancer = w.balancer
	if w.rack != nil {
		b = w.rack
	}
	lastTopic, parts := "", w.topicParts.Load()
	if parts != nil {
		catchUp(cl, w.topic, parts)
	}
	for i := range c.slots {
		sl := &c.slots[i]
		m := &c.msgs[i]
		// The Balancer runs here, in the order of the messages, as in
		// kafka-go: the engine partitions a topic's first records when
		// its metadata comes, which would reorder the calls of a
		// stateful Balancer (RoundRobin, LeastBytes) across topics.
		if m.Topic != "" && m.Topic != lastTopic {
			lastTopic, parts = m.Topic, nil
			if v, ok := w.known.Load(m.Topic); ok {
				parts = v.(*atomic.Int32)
				catchUp(cl, m.Topic, parts)
			}
		}
		pre, preN, refused := int32(-1), int32(0), false
		if parts != nil {
			if n := int(parts.Load()); n > 0 {
				p := b.Balance(*m, w.partitionList(n)...)
				if p >= 0 && p < n {
					pre = int32(p)
				} else {
					refused = true
				}
				preN = int32(n)
			}
		}
		// Field by field: the slot is zeroed, and whole-struct stores
		// cost a write barrier over every pointer of it.
		sl.st.Context = budget
		sl.st.c, sl.st.i, sl.st.partition, sl.st.pre, sl.st.preN, sl.st.cl, sl.st.lane, sl.st.pin = c, i, -1, pre, preN, cl, nil, nil
		if refused {
			sl.st.refused = true
		}
		sl.rec.Topic, sl.rec.Key, sl.rec.Value, sl.rec.Timestamp = m.Topic, m.Key, m.Value, recordTime(m.Time, now)
		sl.rec.Context = &sl.st
		if sl.rec.Topic == "" {
			sl.rec.Topic = w.topic
		}
		if len(m.Headers) > 0 {
			sl.rec.Headers = make([]kgo.RecordHeader, len(m.Headers))
			for j, h := range m.Headers {
				sl.rec.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
			}
		}
	}
}

// catchUp raises parts, the count of topic's partitions the Balancer
// chooses among, to the engine's once the engine loaded more (partitions
// added): the Balancer is then asked once per message, among the
// partitions the Writer knows, as kafka-go asks it, not among the old
// count and again by the engine's partitioner among the new one (a
// stateful Balancer, RoundRobin, would count that message twice).
func catchUp(cl *kgo.Client, topic string, parts *atomic.Int32) {
	n := parts.Load()
	// Past the last partition, the engine answers with the topic's own
	// load error; a partition it has answers a leader, or its error.
	_, _, topicErr := cl.PartitionLeader(topic, math.MaxInt32)
	for {
		leader, _, err := cl.PartitionLeader(topic, n)
		if leader < 0 && (err == nil || err == topicErr) {
			break
		}
		n++
	}
	if n > parts.Load() {
		parts.Store(n)
	}
}

// handOver hands the records of c to the engine.
func (w *Writer) handOver(ctx context.Context, c *call, cl *kgo.Client) {
	if len(c.slots) > maxBuffered {
		if w.gather != nil {
			w.gather.flush()
		}
		w.handOverLarge(ctx, c, cl)
		return
	}
	if w.gather != nil && w.gather.take(cl, c.slots) {
		return
	}
	for i := range c.slots {
		// Background, not ctx: the engine fails a partition's whole
		// queue when its first record's ctx ends, which would fail
		// other callers' messages. The record's Context, its budget,
		// ends with the budget of the oldest record.
		cl.Produce(context.Background(), &c.slots[i].rec, w.promise)
	}
}

// handOverLarge hands the records of c, more than the engine buffers, to
// the engine as room frees (the engine's Produce would wait for it
// without regard to ctx), until ctx ends or the Writer closed: the
// records not handed over then fail with errNotHandedOver, those handed
// over are delivered.
func (w *Writer) handOverLarge(ctx context.Context, c *call, cl *kgo.Client) {
	for i := range c.slots {
		if cause := w.waitRoom(ctx, cl, 1); cause != nil {
			err := fmt.Errorf("%w: %d of the call's %d messages were handed over, the engine buffering at most %d: %w",
				errNotHandedOver, i, len(c.slots), maxBuffered, cause)
			for j := i; j < len(c.slots); j++ {
				sl := &c.slots[j]
				if sl.st.pre >= 0 {
					sl.rec.Partition = sl.st.pre
				}
				c.assign(&sl.st, sl.st.pre)
				w.settleRecord(&sl.rec, &sl.st, err)
			}
			return
		}
		cl.Produce(context.Background(), &c.slots[i].rec, w.promise)
	}
}

// errNotHandedOver is the error of a message whose call ended before it
// was handed to the engine.
var errNotHandedOver = errors.New("sdk: the message was not written (its call ended before there was room for it)")

// recordTime is the timestamp kafka-go stores for a message with Time t,
// written at now: t in milliseconds as kafka-go counts them (UnixNano /
// 1e6), or now when that is 0 (the zero Time, and the epoch itself).
func recordTime(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	ms := t.UnixNano() / 1e6
	if ms == 0 {
		return now
	}
	return time.UnixMilli(ms)
}

// settle tells Close not to wait for c any more.
func (w *Writer) settle(c *call) {
	if c.settled.CompareAndSwap(false, true) && w.awaited.Add(-1) == 0 && w.closed.Load() {
		w.idleOnce.Do(func() { close(w.idle) })
	}
}

// validate applies kafka.Writer's checks before anything is queued, in
// kafka-go's order: every message's size, then each message's topic (on
// the Writer or the message, not both), which must be known to the
// cluster (see knowTopic).
func (w *Writer) validate(ctx context.Context, msgs []kafka.Message) error {
	for i := range msgs {
		if messageSize(&msgs[i]) > w.conf.batchBytes {
			rest := make([]kafka.Message, 0, len(msgs)-1)
			rest = append(append(rest, msgs[:i]...), msgs[i+1:]...)
			return kafka.MessageTooLargeError{Message: msgs[i], Remaining: rest}
		}
	}
	last := ""
	for i := range msgs {
		topic := msgs[i].Topic
		switch {
		case w.topic != "" && topic != "":
			return errors.New("kafka.(*Writer): Topic must not be specified for both Writer and Message")
		case w.topic == "" && topic == "":
			return errors.New("kafka.(*Writer): Topic must be specified for Writer or Message")
		case topic == "":
			if w.topicParts.Load() == nil {
				n, err := w.knowTopic(ctx, w.topic)
				if err != nil {
					return err
				}
				parts := new(atomic.Int32)
				parts.Store(int32(n))
				w.topicParts.CompareAndSwap(nil, parts)
			}
		case topic != last:
			if _, ok := w.known.Load(topic); !ok {
				n, err := w.knowTopic(ctx, topic)
				if err != nil {
					return err
				}
				parts := new(atomic.Int32)
				parts.Store(int32(n))
				w.known.LoadOrStore(topic, parts)
			}
			last = topic
		}
	}
	if err := ctx.Err(); err != nil {
		return err // nothing was handed over: nothing is stored
	}
	return w.awaitRoom(ctx, len(msgs))
}

// maxBuffered is the engine's MaxBufferedRecords (kgo's default).
const maxBuffered = 50_000

// awaitRoom waits, until ctx ends, for room in the engine's buffer for
// the n records of a call, since the engine's Produce waits for room
// without regard to the call's ctx. A call of more records than the
// buffer holds goes on (handOverLarge hands them over as room frees). Concurrent
// callers may all see the same room; those then wait in the engine,
// briefly.
func (w *Writer) awaitRoom(ctx context.Context, n int) error {
	if n > maxBuffered {
		return nil
	}
	// Nothing was handed over when it fails: nothing is stored.
	return w.waitRoom(ctx, w.engine(), int64(n))
}

// waitRoom waits until cl's buffer has room for need more records, ctx
// ends (its error) or the Writer closed (io.ErrClosedPipe), checking
// every millisecond at first and every 50 ms at last.
func (w *Writer) waitRoom(ctx context.Context, cl *kgo.Client, need int64) error {
	// The engine counts its buffer under the lock its promise takes for
	// every record: asked only when the Writer's own count leaves no
	// room. The engine frees a record's room after its promise, which
	// settles it: the engine holds at most one record more than the count.
	if w.unsettled.Load()+need < maxBuffered || cl.BufferedProduceRecords()+need <= maxBuffered {
		return nil
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for wait := time.Millisecond; cl.BufferedProduceRecords()+need > maxBuffered; wait = min(2*wait, 50*time.Millisecond) {
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if w.closed.Load() {
			return io.ErrClosedPipe
		}
	}
	return nil
}

// knowTopic asks the cluster for topic (creating it with
// AllowAutoTopicCreation) before the Writer's first message to it, as
// kafka-go looks a topic up before it queues a message: a topic the
// cluster does not have is kafka.UnknownTopicOrPartition at once, not a
// wait. A topic being created (no leader yet) is known: the engine waits
// for its leaders. Before the client ever reached its cluster, an error no
// retry fixes, or DefaultBootstrapTimeout of refusals, ends the wait (see
// BootstrapError).
func (w *Writer) knowTopic(ctx context.Context, topic string) (int, error) {
	w.hooks.rearm()
	mark := w.hooks.errSeq.Load()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		if w.closed.Load() {
			return 0, io.ErrClosedPipe
		}
		w.fatalMu.Lock()
		fatal := w.fatalCh
		w.fatalMu.Unlock()
		if err := w.hooks.fatalError(); err != nil && attempt > 0 {
			return 0, err
		}
		rctx, cancel := context.WithCancel(ctx)
		type answer struct {
			n   int
			err error
		}
		done := make(chan answer, 1)
		go func() {
			n, err := w.lookUpTopic(rctx, topic)
			done <- answer{n, err}
		}()
		var a answer
		select {
		case a = <-done:
			cancel()
		case <-fatal:
			cancel()
			a = <-done
		case <-w.closing:
			cancel()
			<-done
			return 0, io.ErrClosedPipe
		}
		switch err := a.err; {
		case err == nil:
			return a.n, nil
		case ctx.Err() != nil:
			return 0, w.ctxError(ctx, mark)
		case w.hooks.fatalError() != nil:
			// A refusal no retry fixes, or every bootstrap address
			// failed so (a *BootstrapError): that, not the look-up's
			// own error, which races with it.
			return 0, w.hooks.fatalError()
		case isUnknownTopic(err) && attempt < unknownTopicAttempts-1:
			// A topic created a moment ago may not be known yet to the
			// broker asked; a few quick attempts ride that out.
		case errors.As(err, new(kafka.Error)), engineFatal(err), unfixable(err):
			return 0, kafkaError(err)
		case time.Since(start) >= w.conf.budget:
			// The cluster answered before (a Writer that never reached
			// it has failed above, see BootstrapError) and stopped: the
			// call ends as its messages would, at the delivery budget.
			return 0, fmt.Errorf("sdk: topic %q: the cluster did not answer for its partitions within the delivery budget (%v): %w (%w); last error: %w",
				topic, w.conf.budget, kgo.ErrRecordTimeout, context.DeadlineExceeded, err)
		}
		t := time.NewTimer(w.s.retry.Backoff.Delay(attempt))
		select {
		case <-t.C:
		case <-fatal:
			t.Stop()
		case <-w.closing:
			t.Stop()
			return 0, io.ErrClosedPipe
		case <-ctx.Done():
			t.Stop()
			return 0, w.ctxError(ctx, mark)
		}
	}
}

// unknownTopicAttempts is how many times knowTopic asks before it takes
// UNKNOWN_TOPIC_OR_PARTITION for an answer (within the retry policy's
// first backoffs: a few hundred milliseconds by default).
const unknownTopicAttempts = 3

// lookUpTopic asks the cluster for topic's metadata once: its partition
// count when it has the topic (0 while it creates it), its kafka.Error
// when it does not.
func (w *Writer) lookUpTopic(ctx context.Context, topic string) (int, error) {
	req := metadataRequest(topic)
	req.AllowAutoTopicCreation = w.autoCreate
	resp, err := req.RequestWith(ctx, w.engine())
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case err == nil:
			w.noteTopicID(topic, t.TopicID)
			return len(t.Partitions), nil
		case topicNotReady(err):
			return 0, nil
		}
		return 0, kafkaError(fmt.Errorf("sdk: topic %s: %w", quote(topic), err))
	}
	return 0, kafkaError(fmt.Errorf("sdk: topic %s: %w", quote(topic), kerr.UnknownTopicOrPartition))
}

// noteTopicID records id, the cluster's ID of topic. When the Writer knew
// another, the topic was deleted and made again: the engine, which
// refuses a topic's new ID (its records would fail with
// UNKNOWN_TOPIC_ID for good), forgets the topic, and writes to the new
// one from the next call on, as kafka-go's Writer does (it writes by
// name). Concurrent callers wait here until it is done, so that no
// record of theirs is handed to the engine before it forgets.
func (w *Writer) noteTopicID(topic string, id [16]byte) {
	if id == ([16]byte{}) {
		return // a cluster without topic IDs: the engine writes by name
	}
	w.topicIDsMu.Lock()
	defer w.topicIDsMu.Unlock()
	old, ok := w.topicIDs[topic]
	if ok && old == id {
		return
	}
	if w.topicIDs == nil {
		w.topicIDs = map[string][16]byte{}
	}
	w.topicIDs[topic] = id
	if ok {
		w.engine().PurgeTopicsFromClient(topic)
		w.s.logger.Info("azkafka: the topic was deleted and created again; the Writer writes to the new one",
			"topic", topic)
	}
}

// forgetTopic makes the next call look topic up again (knowTopic): a
// record of it failed as unknown, so the topic may be gone (the next
// call fails with kafka.UnknownTopicOrPartition, as kafka-go's do once
// their metadata says so) or made again (noteTopicID).
func (w *Writer) forgetTopic(topic string) {
	if topic == w.topic {
		w.topicParts.Store(nil)
		return
	}
	w.known.Delete(topic)
}

// messageSize is the size kafka-go counts a message as against
// BatchBytes (kafka.Message's totalSize): the v1 message's, with the
// headers' varint sizes.
func messageSize(m *kafka.Message) int {
	n := 4 + 1 + 1 + 4 + len(m.Key) + 4 + len(m.Value) + 8
	n += varintLen(len(m.Headers))
	for _, h := range m.Headers {
		n += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return n
}

// batchOverhead is the size of a record batch's header (v2).
const batchOverhead = 61

func varintLen(v int) int {
	u := uint64(v) << 1
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// outcome is a synchronous call's result once its messages have their
// outcome, its ctx ended or a refusal was recorded.
func (w *Writer) outcome(ctx context.Context, c *call, mark int64) error {
	var werrs kafka.WriteErrors
	fatal := w.hooks.fatalError()
	finished := 0
	if ctx.Err() != nil && len(c.slots) > maxBuffered {
		// A call too large for the engine's buffer whose ctx ended
		// before all of it was handed over (handOverLarge) returns
		// ctx's error, as a smaller one that found no room does.
		for i := range c.slots {
			if st := &c.slots[i].st; st.fin.Load() && errors.Is(st.err, errNotHandedOver) {
				return w.ctxError(ctx, mark)
			}
		}
	}
	for i := range c.slots {
		st := &c.slots[i].st
		var err error
		if st.fin.Load() {
			finished++
			err = st.err
			if err != nil && w.explicit && refusesProducerID(err) {
				return fmt.Errorf("sdk: idempotence is on (%s) but the cluster refused a producer ID: %w; grant IdempotentWrite on the cluster (or Write on the topic), or turn idempotence off", w.why, err)
			}
		} else if fatal != nil {
			err = fatal
		} else {
			// As kafka-go: the call's ctx ended first, so the call
			// returns ctx's error (the messages stay queued).
			return w.ctxError(ctx, mark)
		}
		if err != nil {
			if werrs == nil {
				werrs = make(kafka.WriteErrors, len(c.slots))
			}
			werrs[i] = err
		}
	}
	if fatal != nil && finished == 0 {
		return fatal
	}
	if werrs == nil {
		return nil
	}
	return werrs
}

func (w *Writer) ctxError(ctx context.Context, mark int64) error {
	return newCtxError(ctx, w.hooks.since(mark))
}

// onFatal wakes the synchronous calls waiting when the engine met a
// refusal no retry fixes.
func (w *Writer) onFatal(error) {
	w.fatalMu.Lock()
	close(w.fatalCh)
	w.fatalCh = make(chan struct{})
	w.fatalMu.Unlock()
}

// onRecord is the engine's promise for every record: kgo calls it once per
// record, serially, in order within a partition.
func (w *Writer) onRecord(r *kgo.Record, err error) {
	st := r.Context.(*recState)
	if err != nil {
		err = kafkaError(err)
		if w.produceAgain(r, st, err) || w.resendCorrupt(r, st, err) {
			return
		}
	}
	w.settleRecord(r, st, err)
}

// noteFailed counts in failed the first failure of c's messages in the
// partition k.
func (c *call) noteFailed(k batchKey, failed *atomic.Int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.failedIn, k) {
		c.failedIn = append(c.failedIn, k)
		failed.Add(1)
	}
}

// settleRecord gives r its outcome, err (nil, or kafkaError's), and
// finishes its call when it was the last record without one.
func (w *Writer) settleRecord(r *kgo.Record, st *recState, err error) {
	c := st.c
	if err != nil && isUnknownTopic(err) {
		w.forgetTopic(r.Topic)
	}
	if err != nil {
		err = w.deliveryError(err, st)
		if !c.report {
			c.noteFailed(batchKey{r.Topic, r.Partition}, &w.wh.failed)
		}
		if w.s.rec != nil {
			w.s.rec.ProduceFailed(r.Topic, r.Partition, 1, errorType(err))
		}
	} else {
		w.wh.acked.Add(1)
		if !w.produced.Load() && w.idempotent.Load() {
			w.produced.Store(true)
		}
	}
	// Counted here, not in the engine's batch hook (which may run after
	// the promise): Stats right after a call sees it. As kafka-go's,
	// Messages and Bytes count the messages written whatever the outcome.
	w.wh.messages.Add(1)
	w.wh.bytes.Add(int64(len(r.Key) + len(r.Value)))
	st.err = err
	st.fin.Store(true)
	w.unsettled.Add(-1)
	if st.lane != nil {
		w.gather.done(st)
	}
	if c.report {
		c.finished(st) // the report settles the record with its call
		return
	}
	w.callDone(c, 1)
}

// callDone notes that n more records of c have their outcome (and, for a
// call that reports, were reported), and finishes c after its last.
func (w *Writer) callDone(c *call, n int) {
	if c.pending.Add(-int64(n)) == 0 {
		if c.done != nil {
			close(c.done)
		}
		w.settle(c)
		w.outstanding.Done()
	}
}

// deliveryError is the error a message gets for err, the engine's: the
// end of its delivery budget, and Close giving it up, say so.
func (w *Writer) deliveryError(err error, st *recState) error {
	switch {
	case errors.Is(err, errNotHandedOver):
		return err
	case !errors.Is(err, context.DeadlineExceeded) && errors.Is(st.Context.Err(), context.DeadlineExceeded) &&
		!errors.Is(err, kgo.ErrClientClosed):
		// The budget ended while the engine met err (it fails a
		// record whose Context ended with the error of its partition
		// when it has one: a dial refused, a metadata load failed).
		return fmt.Errorf("sdk: not acknowledged within the delivery budget (%v) after it was handed over: %w (%w); last error: %w", w.conf.budget, kgo.ErrRecordTimeout, context.DeadlineExceeded, err)
	case errors.Is(err, context.DeadlineExceeded):
		// The budget's Context ended (the caller's ctx never reaches the
		// engine). The error the engine last met, when no broker
		// answered since, is why: a dial refused, a TLS handshake closed.
		// It matches context.DeadlineExceeded, as kafka-go's error after
		// its attempts ran out of WriteTimeout does.
		if last := w.hooks.since(w.hooks.errSeq.Load()); last != nil {
			return fmt.Errorf("sdk: not acknowledged within the delivery budget (%v) after it was handed over: %w (%w); last error: %w", w.conf.budget, kgo.ErrRecordTimeout, context.DeadlineExceeded, last)
		}
		return fmt.Errorf("sdk: not acknowledged within the delivery budget (%v) after it was handed over: %w (%w)", w.conf.budget, kgo.ErrRecordTimeout, context.DeadlineExceeded)
	case w.engineDone.Load() && (errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled)):
		w.gaveUp.Add(1)
		return errClosed
	}
	return err
}

// group is the group of st's message in partition p of its topic.
func (c *call) group(st *recState, p int32) *group {
	k := batchKey{c.slots[st.i].rec.Topic, p}
	if c.groups == nil {
		c.groups = make(map[batchKey]*group, 1)
	}
	g := c.groups[k]
	if g == nil {
		g = &group{}
		c.groups[k] = g
	}
	return g
}

// assign records that the balancer put st's message in partition p.
func (c *call) assign(st *recState, p int32) {
	if !c.report {
		st.partition = p
		return
	}
	c.mu.Lock()
	st.partition = p
	c.group(st, p).assigned++
	c.mu.Unlock()
}

func (c *call) unassign(st *recState) {
	c.mu.Lock()
	var ready []int
	if c.report && st.partition >= 0 {
		// The partition's other records may all have their outcome
		// already: then they are reported now.
		g := c.group(st, st.partition)
		g.assigned--
		if c.queued && len(g.done) > 0 && len(g.done) >= g.assigned {
			ready, g.done, g.assigned = g.done, nil, 0
		}
	}
	st.partition = -1
	c.mu.Unlock()
	if ready != nil {
		c.w.reportGroup(c, ready)
	}
}

// finished notes st's outcome and reports its partition's messages of the
// call once all of them have theirs.
func (c *call) finished(st *recState) {
	c.mu.Lock()
	g := c.group(st, st.partition)
	g.done = append(g.done, st.i)
	var ready []int
	if c.queued && len(g.done) >= g.assigned {
		ready, g.done, g.assigned = g.done, nil, 0
	}
	c.mu.Unlock()
	if ready != nil {
		c.w.reportGroup(c, ready)
	}
}

// markQueued notes that every record of c was handed to the engine, and
// reports the partitions whose messages all have their outcome.
func (c *call) markQueued() {
	var ready [][]int
	c.mu.Lock()
	c.queued = true
	for _, g := range c.groups {
		if len(g.done) > 0 && len(g.done) >= g.assigned {
			ready = append(ready, g.done)
			g.done, g.assigned = nil, 0
		}
	}
	c.mu.Unlock()
	for _, idx := range ready {
		c.w.reportGroup(c, idx)
	}
}

// reportGroup reports messages of one call and partition, idx, which all
// have their outcome: without Completion (async mode) it logs a failure
// and settles them; with Completion it queues them on their partition's
// report lane (see reportLanes).
func (w *Writer) reportGroup(c *call, idx []int) {
	if w.completion == nil {
		for _, run := range outcomeRuns(c, idx) {
			if err := c.slots[run[0]].st.err; err != nil {
				w.wh.failed.Add(1)
				first := &c.slots[run[0]]
				w.s.logger.Warn("azkafka: async write failed for good; set kafka.Writer.Completion to handle failures",
					"topic", first.rec.Topic, "partition", first.rec.Partition, "messages", len(run), "error", err)
			}
		}
		w.callDone(c, len(idx))
		return
	}
	first := &c.slots[idx[0]].rec
	w.reports.queue(w, batchKey{first.Topic, first.Partition}, report{c, idx})
}

// sameOutcome reports whether two messages' outcomes are one: both
// acknowledged, or failed with one error (each message's own wrapping of
// it, as the delivery budget's, says the same).
func sameOutcome(a, b error) bool {
	return a == b || a != nil && b != nil && a.Error() == b.Error()
}

// outcomeRuns splits idx, messages of c, into runs of the same outcome.
func outcomeRuns(c *call, idx []int) [][]int {
	var runs [][]int
	for len(idx) > 0 {
		err := c.slots[idx[0]].st.err
		n := 1
		for n < len(idx) && sameOutcome(c.slots[idx[n]].st.err, err) {
			n++
		}
		runs, idx = append(runs, idx[:n]), idx[n:]
	}
	return runs
}

// reportLanes run Completion off the engine's promise goroutine: one
// goroutine per partition with reports waiting (it ends when none is
// left), so that partitions report in parallel and each in the order its
// messages got their outcome, as kafka-go's per-partition writers do. A
// Completion that writes synchronously to another partition then returns;
// one that writes to its own partition waits for itself, as in kafka-go.
// Reports waiting together are handed to Completion together, one call per
// run of the same outcome (kafka-go calls it once per batch, which may
// hold messages of several calls). A call's records are settled once
// reported: a synchronous call returns, and Close stops waiting for it,
// after its Completion ran.
type reportLanes struct {
	mu    sync.Mutex
	lanes map[batchKey][]report // reports waiting, by partition
}

// report is messages of one call and partition with their outcome.
type report struct {
	c   *call
	idx []int
}

// queue adds r to k's lane, starting the lane's goroutine when it had none.
func (l *reportLanes) queue(w *Writer, k batchKey, r report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, running := l.lanes[k]
	if l.lanes == nil {
		l.lanes = map[batchKey][]report{}
	}
	l.lanes[k] = append(q, r)
	if !running {
		go w.runReports(k)
	}
}

// runReports hands k's reports to Completion until none is left.
func (w *Writer) runReports(k batchKey) {
	l := &w.reports
	for {
		l.mu.Lock()
		rs := l.lanes[k]
		if len(rs) == 0 {
			delete(l.lanes, k)
			l.mu.Unlock()
			return
		}
		l.lanes[k] = rs[:0:0]
		l.mu.Unlock()
		var out []kafka.Message
		var outErr error
		for _, r := range rs {
			for _, run := range outcomeRuns(r.c, r.idx) {
				err := r.c.slots[run[0]].st.err
				if err != nil {
					w.wh.failed.Add(1)
				}
				if len(out) > 0 && err != outErr {
					w.completion(out, outErr)
					out = nil
				}
				out, outErr = w.appendReported(out, r.c, run, err), err
			}
		}
		if len(out) > 0 {
			w.completion(out, outErr)
		}
		for _, r := range rs {
			w.callDone(r.c, len(r.idx))
		}
	}
}

// appendReported appends the messages run of c, whose outcome is err, as
// Completion gets them.
func (w *Writer) appendReported(out []kafka.Message, c *call, run []int, err error) []kafka.Message {
	c.msgsMu.Lock()
	defer c.msgsMu.Unlock()
	for _, i := range run {
		sl := &c.slots[i]
		m := c.msgs[i]
		m.Topic = sl.rec.Topic
		m.Partition = int(sl.rec.Partition)
		// As kafka-go's: Time as the caller gave it, and Offset only
		// where the broker answered with one.
		if err == nil && w.conf.acks != kafka.RequireNone {
			m.Offset = max(sl.rec.Offset, -1) // -1: stored before (seqConn)
		}
		out = append(out, m)
	}
	return out
}

// writerPartitioner runs the Writer's kafka.Balancer as kgo's
// partitioner, with kafka-go's arguments: the message and every partition
// of its topic, in order. kafka-go hands the Balancer every partition,
// whether its leader is available or not, so every record requires
// consistency (the engine then maps the choice to the partition of that
// number).
type writerPartitioner struct{ w *Writer }

func (p writerPartitioner) ForTopic(string) kgo.TopicPartitioner { return p }

func (writerPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (p writerPartitioner) Partition(r *kgo.Record, n int) int {
	st, ok := r.Context.(*recState)
	if !ok || n <= 0 {
		return 0
	}
	if st.lastN == int32(n) {
		// Partitioned before among as many partitions (a resend): the
		// same partition, not the Balancer's next answer.
		if st.last >= 0 {
			st.c.assign(st, st.last)
		}
		return int(st.last)
	}
	part := int(st.pre)
	// Each record carries the count its choice was made among: once
	// the count changes, every record chosen among the old one is
	// chosen again, so that a call's messages of one key keep one
	// partition.
	chosen := st.preN == int32(n)
	if st.refused && chosen {
		st.last, st.lastN = -1, int32(n)
		return -1 // the Balancer chose none of these partitions at hand-over
	}
	if part < 0 || !chosen {
		if parts := p.w.partsOf(r.Topic); parts.Load() != int32(n) {
			parts.Store(int32(n))
		}
		// Not chosen yet, or the topic's partitions changed since:
		// choose among the engine's.
		var b kafka.Balancer = p.w.balancer
		if p.w.rack != nil {
			b = p.w.rack
		}
		st.c.msgsMu.Lock()
		m := st.c.msgs[st.i]
		st.c.msgsMu.Unlock()
		part = b.Balance(m, p.w.partitionList(n)...)
	}
	st.last, st.lastN = -1, int32(n) // none of them, when part is out of range
	if part >= 0 && part < n {
		st.last = int32(part)
		st.c.assign(st, int32(part))
		if f := p.w.fill; f != nil && f.add(r.Topic, int32(part)) {
			p.w.sendNow()
		}
	}
	return part
}

// partsOf is where the partition count of topic is kept (a throwaway
// for a topic not asked for: the engine partitions it alone).
func (w *Writer) partsOf(topic string) *atomic.Int32 {
	if topic == w.topic {
		if p := w.topicParts.Load(); p != nil {
			return p
		}
	} else if v, ok := w.known.Load(topic); ok {
		return v.(*atomic.Int32)
	}
	return new(atomic.Int32)
}

// partitionList returns 0..n-1, shared and read only (as kafka-go's).
func (w *Writer) partitionList(n int) []int {
	if p := w.parts.Load(); p != nil && len(*p) >= n {
		return (*p)[:n:n]
	}
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	w.parts.Store(&s)
	return s
}
