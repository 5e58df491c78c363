package sdk

// writer_idempotence.go holds the Writer's idempotence: the decision from
// RequiredAcks and the setting, the fallback to a client without it when
// the cluster refuses a producer ID, the producer ID and epoch for Stats,
// the leader's check of a resent batch it answered out of sequence
// (DescribeProducers; the sequence check itself is seqcheck.go), and the
// engine hooks behind kafka.WriterStats.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
)

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

// produceAgain produces r again on the current client when it failed
// because of the fallback: under auto, once the cluster refused a producer
// ID, the records the idempotent client failed (with the refusal, or
// closed) go to the client without idempotence, which the first refusal
// creates (fallBack). It reports whether r was handed over again.
func (w *Writer) produceAgain(r *kgo.Record, st *recState, err error) bool {
	if w.explicit || w.closed.Load() {
		return false
	}
	cur := w.engine()
	switch {
	case st.cl == cur:
		if !refusesProducerID(err) || !w.idempotent.Load() {
			return false
		}
		if cur = w.fallBack(st.cl, err); cur == nil {
			return false
		}
	case !refusesProducerID(err) && !errors.Is(err, kgo.ErrClientClosed):
		return false
	}
	st.c.unassign(st)
	st.cl = cur
	cur.Produce(context.Background(), r, w.promise)
	return true
}

// fallBack replaces the idempotent client refused a producer ID with one
// without idempotence, once, logging the one warning. It returns the
// current client, nil when none could be made.
func (w *Writer) fallBack(refused *kgo.Client, err error) *kgo.Client {
	w.clientMu.Lock()
	defer w.clientMu.Unlock()
	if cur := w.engine(); cur != refused || w.closed.Load() {
		return cur
	}
	cl, nerr := kgo.NewClient(append(slices.Clip(w.baseOpts), acksOpts(w.conf.acks, false)...)...)
	if nerr != nil {
		w.s.logger.Error("azkafka: the cluster refused a producer ID and a client without idempotence could not be made", "error", nerr)
		return nil
	}
	w.client.Store(cl)
	w.idempotent.Store(false)
	if w.hooks.seq != nil && w.hooks.seq.producer != nil {
		w.hooks.seq.producer.saw(-1, -1)
	}
	w.retired.Add(1)
	go func() {
		defer w.retired.Done()
		refused.Close()
	}()
	w.s.logger.Warn("azkafka: the cluster refused a producer ID, so this Writer is not idempotent: a resend after a lost response may store messages twice; grant IdempotentWrite on the cluster (or Write on the topic), or set "+EnvIdempotence+"=false to silence this",
		"error", err, "kafka_error", kafkaGoText(err))
	return cl
}

// kafkaGoText is kafka-go's text for the Kafka error code in err, "" when
// it has none.
func kafkaGoText(err error) string {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Error()
	}
	return ""
}

// producerSeq asks the leader of the partition (DescribeProducers) for the
// last sequence number it holds of the producer at epoch; see seqConn.
func (w *Writer) producerSeq(ctx context.Context, topic string, topicID [16]byte, partition int32, pid int64, epoch int16) (int32, bool, error) {
	cl := w.engine()
	if topic == "" {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = topicID
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, false, err
		}
		for _, t := range resp.Topics {
			if t.TopicID == topicID && t.Topic != nil && t.ErrorCode == 0 {
				topic = *t.Topic
			}
		}
		if topic == "" {
			return 0, false, fmt.Errorf("no topic with ID %x", topicID)
		}
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, false, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, false, err
			}
			for _, ap := range p.ActiveProducers {
				if ap.ProducerID == pid {
					return ap.LastSequence, int16(ap.ProducerEpoch) == epoch, nil
				}
			}
		}
	}
	return 0, false, nil
}

// resentStored counts and logs a resent batch the broker had stored.
func (w *Writer) resentStored(addr string, b sentBatch, last int32) {
	w.counters.resentStored.Add(1)
	if w.s.rec != nil {
		w.s.rec.Resent(metrics.ResendStored)
	}
	w.s.logger.Info("azkafka: a resent batch was already stored (a restarted broker keeps only each producer's last batch); counted delivered, not stored twice",
		"broker", addr, "topic", b.topic, "partition", b.partition, "batch", b.String(), "broker_last_sequence", last)
}

// producerID returns the idempotent engine's producer ID and epoch (the
// last seen, after Close), -1 before the first acknowledged batch, and
// whether they moved since the previous call.
func (w *Writer) producerID() (int64, int16, int64) {
	if w.produced.Load() && !w.engineDone.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		id, epoch, err := w.engine().ProducerID(ctx)
		cancel()
		if err == nil && id >= 0 {
			return id, epoch, w.wh.epochMoved(id, epoch)
		}
	}
	w.wh.epochMu.Lock()
	defer w.wh.epochMu.Unlock()
	if !w.wh.seen {
		return -1, -1, 0
	}
	return w.wh.lastID, w.wh.lastEpoch, 0
}

// writerHooks receives the engine's produce events behind
// kafka.WriterStats. Safe for concurrent use.
type writerHooks struct {
	counters                        *counters
	rec                             metrics.Recorder // nil without metrics
	metrics                         *metricsHooks    // nil without metrics
	writes, messages, bytes, failed atomic.Int64
	// acked counts the records acknowledged (their promises), hooked
	// those the engine's batch hook reported (see awaitHooks).
	acked, hooked         atomic.Int64
	caughtUp              atomic.Pointer[chan struct{}] // awaitHooks' wait, closed by the hook
	writeTime, waitTime   summary[time.Duration]
	batchSize, batchBytes summary[int64]
	epochMu               sync.Mutex
	lastID                int64
	lastEpoch             int16
	seen                  bool
}

var (
	_ kgo.HookProduceBatchWritten = (*writerHooks)(nil)
	_ kgo.HookBrokerWrite         = (*writerHooks)(nil)
	_ kgo.HookBrokerRead          = (*writerHooks)(nil)
)

// produceKey is the Produce request's API key.
const produceKey = 0

func (h *writerHooks) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, partition int32, m kgo.ProduceBatchMetrics) {
	h.batchSize.observe(int64(m.NumRecords))
	h.batchBytes.observe(int64(m.UncompressedBytes))
	if h.metrics != nil {
		h.metrics.produced(meta, topic, partition, m)
	}
	h.hooked.Add(int64(m.NumRecords))
	if p := h.caughtUp.Load(); p != nil && h.hooked.Load() >= h.acked.Load() && h.caughtUp.CompareAndSwap(p, nil) {
		close(*p)
	}
}

// hookWait bounds how long Close waits for the engine's batch hooks.
const hookWait = time.Second

// awaitHooks waits, at most hookWait, until the engine's batch hook has
// reported every acknowledged record; the records' promises have all
// been called. The engine calls the hook on a goroutine of its own after
// the promises, so a call can return, and Close end the engine, before
// the last batches reach WithMetrics and Stats.
func (h *writerHooks) awaitHooks() {
	ch := make(chan struct{})
	h.caughtUp.Store(&ch)
	if h.hooked.Load() >= h.acked.Load() {
		return
	}
	t := time.NewTimer(hookWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// produceOK reports whether a request was a Produce that went through;
// one that could not be written, or whose response was lost, counts as a
// retry: the engine resends its batches (the same batches, with
// idempotence).
func (h *writerHooks) produceOK(key int16, err error) bool {
	if key != produceKey {
		return false
	}
	if err != nil {
		if !errors.Is(err, kgo.ErrClientClosed) {
			h.counters.retries.Add(1)
			if h.rec != nil {
				h.rec.Resent(metrics.ResendConnection)
			}
		}
		return false
	}
	return true
}

// OnBrokerWrite counts produce requests.
func (h *writerHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if h.produceOK(key, err) {
		h.writes.Add(1)
	}
}

// OnBrokerRead counts the produce responses lost (produceOK).
func (h *writerHooks) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	h.produceOK(key, err)
}

// OnBrokerE2E times produce requests from their write to their response
// read, kafka-go's WriteTime (its produce call).
func (h *writerHooks) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == produceKey && e2e.Err() == nil {
		h.writeTime.observe(e2e.DurationE2E())
	}
}

// OnBrokerThrottle records the time a broker throttled the Writer for,
// kafka-go's WaitTime (a produce response's throttle time).
func (h *writerHooks) OnBrokerThrottle(_ kgo.BrokerMetadata, interval time.Duration, _ bool) {
	h.waitTime.observe(interval)
}

// epochMoved returns 1 when id and epoch differ from those of the
// previous call (after the first), else 0.
func (h *writerHooks) epochMoved(id int64, epoch int16) int64 {
	h.epochMu.Lock()
	defer h.epochMu.Unlock()
	moved := h.seen && (id != h.lastID || epoch != h.lastEpoch)
	h.lastID, h.lastEpoch, h.seen = id, epoch, true
	if moved {
		return 1
	}
	return 0
}

// resendCorrupt queues r to be produced again when a broker refused its
// batch as corrupt (CORRUPT_MESSAGE: its checksum did not match, so it was
// not stored), as kafka-go and Java's clients retry it; the engine fails
// such a batch and every later record of its partition. It reports whether
// r was queued: not once Close has closed the engine (Close's wait for
// the calls goes on through these resends), r's delivery budget is spent
// or it was resent as often as the retry policy tries.
//
// The promise must not produce (the engine's buffer room is freed after
// it), so the queue is drained by a goroutine of its own, in the order the
// records failed, after the retry policy's backoff: each partition's
// records keep their order. Records of other calls made meanwhile may be
// stored before them, as between concurrent calls.
func (w *Writer) resendCorrupt(r *kgo.Record, st *recState, err error) bool {
	if !errors.Is(err, kerr.CorruptMessage) || w.engineDone.Load() || st.Context.Err() != nil ||
		st.resends+1 >= max(w.s.retry.MaxAttempts, 1) {
		return false
	}
	st.resends++
	w.hooks.counters.retries.Add(1)
	// Off its partition now, on the goroutine that reports outcomes in
	// their order: the call's other records there that have theirs are
	// reported before any later outcome of the partition.
	st.c.unassign(st)
	q := &w.corrupt
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recs = append(q.recs, r)
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go w.drainCorrupt()
	}
	return true
}

// corruptQueue holds the records resendCorrupt queued.
type corruptQueue struct {
	mu      sync.Mutex
	recs    []*kgo.Record
	running bool
	wg      sync.WaitGroup // the draining goroutine, for Close
}

// drainCorrupt produces the queued records again, after a backoff, until
// the queue is empty.
func (w *Writer) drainCorrupt() {
	q := &w.corrupt
	defer q.wg.Done()
	for {
		q.mu.Lock()
		recs := q.recs
		q.recs = nil
		if len(recs) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		tries := 0
		for _, r := range recs {
			tries = max(tries, r.Context.(*recState).resends)
		}
		time.Sleep(w.s.retry.Backoff.Delay(tries - 1))
		cl := w.engine()
		for _, r := range recs {
			st := r.Context.(*recState)
			st.cl = cl
			// A closed engine fails it as given up by Close.
			cl.Produce(context.Background(), r, w.promise)
		}
	}
}
