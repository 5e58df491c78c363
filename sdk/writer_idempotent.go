package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	q *asyncQueue // async mode
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
	iw.p = produce.New(produce.Config{
		Transport:   sw.transport,
		Addr:        w.Addr,
		Compression: w.Compression,
		Timeout:     timeout,
		Policy:      sw.policy,
		Rediscover:  func() { sw.rediscover(false) },
	})
	if w.Async {
		iw.q = newAsyncQueue(iw)
	}
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
		return shouldRetry(err) || errors.Is(err, kafka.BrokerNotAvailable)
	}
	err = policy.Do(ctx, func(ctx context.Context) error {
		err := iw.p.Init(ctx)
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

// write is a synchronous WriteMessages. fellBack reports that the cluster
// refused a producer ID under auto: the caller writes msgs at least once.
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
	// Each partition's messages in call order, cut into batches; round r
	// sends the r-th batch of every partition, so a partition's batches
	// are stored in order.
	type queue struct {
		key  assigned
		idx  []int
		next int
	}
	var queues []*queue
	byKey := make(map[assigned]*queue)
	for i, a := range where {
		q := byKey[a]
		if q == nil {
			q = &queue{key: a}
			byKey[a] = q
			queues = append(queues, q)
		}
		q.idx = append(q.idx, i)
	}
	var werrs kafka.WriteErrors
	batches := make([]*produce.Batch, 0, len(queues))
	spans := make([][]int, 0, len(queues))
	for {
		batches, spans = batches[:0], spans[:0]
		for _, q := range queues {
			if q.next == len(q.idx) {
				continue
			}
			n := iw.cut(msgs, q.idx[q.next:])
			span := q.idx[q.next : q.next+n]
			q.next += n
			bm := make([]kafka.Message, n)
			for j, i := range span {
				bm[j] = msgs[i]
			}
			batches = append(batches, &produce.Batch{Topic: q.key.topic, Partition: q.key.partition, Messages: bm})
			spans = append(spans, span)
		}
		if len(batches) == 0 {
			break
		}
		byBatch := make(map[*produce.Batch][]int, len(batches))
		for j, b := range batches {
			byBatch[b] = spans[j]
		}
		if err := iw.p.Produce(ctx, batches); err != nil {
			for _, b := range batches {
				b.Err = err
			}
		}
		for _, b := range batches {
			iw.report(b)
			if b.Err == nil {
				continue
			}
			if werrs == nil {
				werrs = make(kafka.WriteErrors, len(msgs))
			}
			for _, i := range byBatch[b] {
				werrs[i] = b.Err
			}
		}
	}
	if werrs == nil {
		return false, nil
	}
	return false, werrs
}

// cut returns how many of the messages at idx (in order) form the next
// batch: at most BatchSize messages and BatchBytes bytes, at least one.
func (iw *idempotentWriter) cut(msgs []kafka.Message, idx []int) int {
	size := produce.BatchOverhead
	for n, i := range idx {
		size += produce.RecordSize(&msgs[i])
		if n == iw.batchSize || (n > 0 && size > iw.batchBytes) {
			return n
		}
	}
	return len(idx)
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

// asyncQueue holds the messages of an async Writer per partition, in call
// order, and flushes a partition's next batch when it is full or its
// oldest message waited BatchTimeout, with at most one batch per
// partition in flight.
type asyncQueue struct {
	iw      *idempotentWriter
	mu      sync.Mutex
	parts   map[assigned]*pendingPart
	flying  int // batches in flight
	closing bool
	kick    chan struct{}
	done    chan struct{}
}

type pendingPart struct {
	msgs  []kafka.Message
	bytes int
	since time.Time // when the oldest waiting message arrived
	busy  bool      // a batch of this partition is in flight
}

func newAsyncQueue(iw *idempotentWriter) *asyncQueue {
	q := &asyncQueue{iw: iw, parts: make(map[assigned]*pendingPart), kick: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

// enqueue is an async WriteMessages.
func (q *asyncQueue) enqueue(ctx context.Context, msgs []kafka.Message) (fellBack bool, err error) {
	iw := q.iw
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
	now := time.Now()
	full := false
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false, io.ErrClosedPipe
	}
	for i, a := range where {
		pp := q.parts[a]
		if pp == nil {
			pp = &pendingPart{}
			q.parts[a] = pp
		}
		if len(pp.msgs) == 0 {
			pp.since = now
		}
		pp.msgs = append(pp.msgs, msgs[i]) // a copy: the caller may reuse msgs
		pp.bytes += produce.RecordSize(&msgs[i])
		full = full || len(pp.msgs) >= iw.batchSize || pp.bytes+produce.BatchOverhead >= iw.batchBytes
	}
	q.mu.Unlock()
	if full {
		q.wake()
	}
	return false, nil
}

func (q *asyncQueue) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *asyncQueue) loop() {
	defer close(q.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		now := time.Now()
		wait := time.Duration(-1)
		var ready []*produce.Batch
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
			if due := pp.since.Add(q.iw.batchTimeout); !full && !q.closing && now.Before(due) {
				if d := due.Sub(now); wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			idx := make([]int, len(pp.msgs))
			for i := range idx {
				idx[i] = i
			}
			n := q.iw.cut(pp.msgs, idx)
			batch := &produce.Batch{Topic: key.topic, Partition: key.partition, Messages: pp.msgs[:n:n]}
			pp.msgs = pp.msgs[n:]
			for i := range batch.Messages {
				pp.bytes -= produce.RecordSize(&batch.Messages[i])
			}
			pp.since = now
			pp.busy = true
			ready = append(ready, batch)
		}
		if len(ready) == 0 && empty && q.flying == 0 && q.closing {
			q.mu.Unlock()
			return
		}
		q.flying += len(ready)
		q.mu.Unlock()
		if len(ready) > 0 {
			go q.flush(ready)
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

// flush produces one batch per partition and reports them.
func (q *asyncQueue) flush(batches []*produce.Batch) {
	if err := q.iw.p.Produce(context.Background(), batches); err != nil {
		for _, b := range batches {
			b.Err = err
		}
	}
	for _, b := range batches {
		q.iw.report(b)
	}
	q.mu.Lock()
	for _, b := range batches {
		q.parts[assigned{b.Topic, b.Partition}].busy = false
	}
	q.flying -= len(batches)
	q.mu.Unlock()
	q.wake()
}

// close flushes every waiting message and returns once all were reported.
func (q *asyncQueue) close() {
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
