package sdk

// writer.go maps kafka.Writer onto the engine's producer (kgo): the
// configuration in NewWriter and writerEngineOpts, the user's Balancer as
// kgo's partitioner, WriteMessages' calls and their outcome (nil, kafka-go's
// call-level errors, kafka.WriteErrors), Completion per partition of a
// call, the fallback when the cluster refuses a producer ID, and Stats.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
)

// Writer is a drop-in replacement for *kafka.Writer: the same methods with
// kafka-go's meaning, configured by a kafka.Writer, running on franz-go's
// producer (kgo). Create it with NewWriter; the zero value is not usable.
// Its methods are safe for concurrent use.
//
// # Delivery
//
// Every RequiredAcks takes the same path; what the broker promises differs:
//
//   - kafka.RequireAll: idempotent by default (AZKAFKA_IDEMPOTENCE,
//     WithIdempotence), as Kafka's Java producer is since Kafka 3.0. The
//     Writer gets a producer ID (InitProducerId) on first use and numbers
//     each partition's batches; a resend after a lost response or a leader
//     change is the same batch, which the broker stores once. Up to 5
//     produce requests are in flight per broker, in order per partition
//     (the broker enforces the sequence numbers), so each partition stores
//     its messages in the order they were handed to the Writer. A
//     restarted broker recognises only each producer's last batch per
//     partition; a resend of an earlier one it answers out of sequence is
//     checked with the partition's leader (DescribeProducers, which needs
//     Read on the topic) and counted delivered when the leader holds
//     it (SDKStats.ResentStored), not stored again (without Read the
//     engine renumbers it under a new epoch, and it may be stored twice).
//     Exactly once per partition, except for a batch whose outcome stays
//     unknown when the delivery budget or ctx runs out (it may have been
//     stored once; its messages get the error).
//   - kafka.RequireOne: the leader acknowledges; not idempotent, so a
//     resend after a lost response may store a batch twice (at least
//     once), and a leader that fails before its followers copied a batch
//     loses it.
//   - kafka.RequireNone (kafka-go's default): the broker sends no answer,
//     so a message lost with its connection is lost without an error.
//     NewWriter logs a warning; use RequireAll.
//
// An explicit WithIdempotence(true) or AZKAFKA_IDEMPOTENCE=true with acks
// other than RequireAll is a NewWriter error. If the cluster refuses a
// producer ID (Kafka 4.x wants IdempotentWrite on the cluster or Write on a
// topic): under auto the Writer logs one warning naming the cause and goes
// on without idempotence (at least once); under an explicit true,
// WriteMessages returns the refusal. Stats().SDK.Idempotent says which.
//
// # Retries and the delivery budget
//
// The engine resends what failed with a transient error (a closed or reset
// connection, a refused connect, a moved leader, a broker not yet ready)
// until the message is acknowledged or its delivery budget is spent: the
// retry policy's attempts × (WriteTimeout + its backoff maximum), 110 s
// with the defaults (10 × (10 s + 1 s)), in the spirit of Java's
// delivery.timeout.ms (120 s), counted from when the message was handed
// to WriteMessages (never from its Time, which may be any time: a replay's
// or a backfill's is stored as given). Attempts are not counted one by one: fast
// refusals during a leader election do not use the budget up before the
// cluster elected a new leader (about 9 s with Kafka's default broker
// session timeout). The backoff between resends is the retry policy's
// (WithRetry, AZKAFKA_RETRY_BACKOFF_*); kafka.Writer's MaxAttempts,
// WriteBackoffMin and WriteBackoffMax are not used. A synchronous call
// still ends with its ctx. Errors that waiting cannot fix (TLS
// verification, SASL, authorization) return at once.
//
// The first call to each topic asks the cluster for it, as kafka-go does:
// a topic the cluster does not have (and does not create:
// AllowAutoTopicCreation) is kafka.UnknownTopicOrPartition at once, in
// async mode too. Before the Writer ever reached its cluster, bootstrap
// addresses no retry fixes (an unknown host, TLS against a plaintext port
// or the reverse, a server that is not Kafka) end the call as soon as every
// address failed so, and refusals after DefaultBootstrapTimeout; the error
// is a *BootstrapError naming each address and its cause.
//
// # Calls
//
// A synchronous WriteMessages is sent as soon as its messages are queued
// (messages of concurrent calls ride along): it never waits for
// BatchTimeout, which paces async mode only. It returns nil, kafka-go's
// call-level errors (a topic on both or neither of the Writer and the
// message, kafka.MessageTooLargeError, a topic's kafka.Error,
// io.ErrClosedPipe after Close), or a kafka.WriteErrors aligned with msgs.
// A call whose ctx has already ended stores nothing and returns ctx's
// error. When its ctx ends while it waits, it returns ctx's error, as
// kafka-go does (its text names the last cause the engine absorbed); the
// messages stay queued and may still be stored, and Completion still
// reports them.
//
// In async mode WriteMessages returns once the messages are queued; they
// are sent BatchTimeout after they were queued, or as soon as BatchSize
// messages wait on one partition (kafka-go's two triggers; the engine cuts
// batches by bytes, BatchBytes, so a batch may carry more than BatchSize
// messages). Completion, when set, receives every message once, grouped per call and
// partition (kafka-go calls it per batch), with Topic, Partition and (when
// acknowledged) Offset set. A
// message that fails for good in async mode without a Completion is
// logged at Warn, once per call and partition, naming the topic,
// partition and cause.
//
// A synchronous call holds its own messages until they are acknowledged;
// the engine buffers at most 50,000 records (kgo's MaxBufferedRecords),
// after which WriteMessages blocks until there is room.
//
// # kafka.Writer fields
//
// What each field of the kafka.Writer given to NewWriter becomes on the
// engine:
//
//   - Addr: the seed brokers.
//   - Topic: the records' topic; on the Writer or on each message, not
//     both (kafka-go's errors).
//   - Balancer: called with kafka-go's arguments (the message, every
//     partition in order) as the engine's partitioner, so keyed messages
//     land where kafka-go puts them. Default &kafka.RoundRobin{}.
//   - RequiredAcks: AllISRAcks (idempotent unless turned off), LeaderAck,
//     NoAck.
//   - MaxAttempts, WriteBackoffMin, WriteBackoffMax: not used; the retry
//     policy (AZKAFKA_RETRY_*, WithRetry) sets the backoff and, with
//     WriteTimeout, the delivery budget (the engine's
//     RecordDeliveryTimeout).
//   - BatchSize: in async mode, once BatchSize messages wait on a
//     partition they are sent without waiting for BatchTimeout (kafka-go's
//     trigger). Not a cap: the engine cuts batches by bytes only
//     (BatchBytes), so a batch may carry more; Stats().MaxBatchSize reports
//     it.
//   - BatchBytes: a message larger than BatchBytes (default 1 MiB), counted
//     as kafka-go counts it, is kafka.MessageTooLargeError; the engine's
//     batches hold up to BatchBytes plus a batch header, and no more than
//     Kafka's default max.message.bytes (1,048,588) unless BatchBytes is
//     larger.
//   - BatchTimeout: ProducerLinger in async mode (default 1 s); 0 for
//     synchronous calls.
//   - WriteTimeout, ReadTimeout: ProduceRequestTimeout and
//     RequestTimeoutOverhead (the smaller of the two, default 10 s);
//     WriteTimeout also sizes the delivery budget and bounds Close.
//   - Async, Completion: WriteMessages returns once queued;
//     Completion(messages, err) is called per call and partition with
//     Partition and Offset set.
//   - Compression: ProducerBatchCompression (none by default, as kafka-go).
//   - Logger, ErrorLogger: the engine's log lines, Info and up to Logger,
//     Warn and up to ErrorLogger.
//   - Transport: nil or a *kafka.Transport, whose TLS, SASL, Dial,
//     DialTimeout and Resolver serve the SDK's dial; IdleTimeout becomes
//     ConnIdleTimeout, MetadataTTL MetadataMaxAge (and the age of the
//     rack-aware view, see WithRackAwarePartitioning), ClientID the user
//     part of the client ID.
//   - AllowAutoTopicCreation: AllowAutoTopicCreation.
type Writer struct {
	s          *session
	hooks      *engineHooks
	wh         *writerHooks
	topic      string
	balancer   kafka.Balancer
	rack       *rackAwareBalancer // nil without rack-aware partitioning
	rackTTL    time.Duration
	rackAt     atomic.Int64 // unix nanoseconds of the last rack view
	async      bool
	completion func(messages []kafka.Message, err error)
	conf       writerConf
	promise    func(*kgo.Record, error)
	parts      atomic.Pointer[[]int] // 0..n-1, shared by the balancer calls

	// explicit: idempotence was asked for, so a refused producer ID is
	// an error, never a fallback; why names the setting.
	explicit   bool
	why        string
	idempotent atomic.Bool
	baseOpts   []kgo.Opt // for the client without idempotence
	clientMu   sync.Mutex
	client     atomic.Pointer[kgo.Client]
	retired    sync.WaitGroup // clients replaced by the fallback, closing

	fatalMu sync.Mutex
	fatalCh chan struct{} // closed and replaced at each refusal

	outstanding sync.WaitGroup // calls with messages not reported yet
	closeMu     sync.RWMutex
	closed      atomic.Bool // Close was called
	engineDone  atomic.Bool // the engine is closed
	counters    counters
	produced    atomic.Bool // a batch was acknowledged: the producer ID is known
	fill        *batchFill  // async mode: BatchSize as the trigger to send

	budget     *budgetClock
	autoCreate bool
	// topicParts is the partition count of the Writer's Topic (nil until
	// the cluster was asked for it), known those of per-message topics
	// (topic -> *atomic.Int32); a count of 0 leaves the choice to the
	// engine's partitioner.
	topicParts atomic.Pointer[atomic.Int32]
	known      sync.Map
	// awaited counts the calls Close waits for: async calls and
	// synchronous calls still waiting, until their messages have their
	// outcome; idle is closed when it drops to 0 after Close began.
	awaited  atomic.Int64
	idleOnce sync.Once
	idle     chan struct{}
	// gaveUp counts the messages Close failed.
	gaveUp atomic.Int64
}

// writerConf is what Stats reports of the configuration.
type writerConf struct {
	acks                      kafka.RequiredAcks
	batchSize                 int
	batchBytes                int
	batchTimeout              time.Duration
	readTimeout, writeTimeout time.Duration
	budget                    time.Duration
}

// Defaults of kafka.Writer that the Writer applies the same way.
const (
	defaultBatchSize    = 100
	defaultBatchTimeout = time.Second
	defaultWriteTimeout = 10 * time.Second
	// defaultBatchBytes is kafka-go's limit on a message when BatchBytes
	// is unset, counted as kafka-go counts (messageSize).
	defaultBatchBytes = 1 << 20
	// brokerMaxMessageBytes is Kafka's default max.message.bytes, the
	// largest record batch a broker takes.
	brokerMaxMessageBytes = 1048588
	// defaultRackTTL is how old the leaders' racks may be for rack-aware
	// partitioning when the Transport sets no MetadataTTL (kafka-go's
	// default MetadataTTL).
	defaultRackTTL = 6 * time.Second
)

// NewWriter returns a Writer configured like w, which it does not modify or
// use afterwards, with the azkafka client ID and connection policy:
//
//	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events", RequiredAcks: kafka.RequireAll})
//
// w.Transport, when set, must be a *kafka.Transport: its TLS, SASL, Dial,
// DialTimeout, IdleTimeout, MetadataTTL, Resolver and ClientID (as the
// user part of the client ID) are kept. Options win over AZKAFKA_*
// environment variables.
//
// NewWriter returns an error, rather than failing on first use, when w is
// nil, has no Addr, has an unsupported Transport, or when the configuration
// (options or environment) is invalid. It may detect the availability zone
// (once per process) unless WithAZ or AZKAFKA_AZ provides it. It does not
// wait for the cluster.
func NewWriter(w *kafka.Writer, opts ...Option) (*Writer, error) {
	if w == nil {
		return nil, errors.New("sdk: NewWriter: writer is nil")
	}
	if w.Addr == nil {
		return nil, errors.New("sdk: NewWriter: kafka.Writer.Addr is nil: set it, e.g. kafka.TCP(\"broker:9092\")")
	}
	opts, err := writerOptions(w.Transport, opts)
	if err != nil {
		return nil, inCtor("NewWriter", err)
	}
	s, err := newSession(context.Background(), append([]Option{forCtor(ctorWriter)}, opts...))
	if err != nil {
		return nil, inCtor("NewWriter", err)
	}
	idempotent, why, err := idempotenceDecision(w.RequiredAcks, s.idempotence)
	if err != nil {
		return nil, inCtor("NewWriter", err)
	}
	if s.baseDialer == nil && s.baseTransport != nil {
		s.baseDialer = transportDialer(s.baseTransport)
	}
	sw := &Writer{
		s:          s,
		wh:         &writerHooks{},
		topic:      w.Topic,
		balancer:   w.Balancer,
		async:      w.Async,
		completion: w.Completion,
		explicit:   s.idempotence.mode == idempotenceOn,
		why:        why,
		fatalCh:    make(chan struct{}),
		rackTTL:    defaultRackTTL,
	}
	if sw.balancer == nil {
		sw.balancer = &kafka.RoundRobin{}
	}
	sw.promise = sw.onRecord
	s.startRecorder(metrics.Client{Kind: metrics.KindWriter, Topic: w.Topic, Idempotent: idempotent})
	sw.hooks = newEngineHooks(s, &sw.counters, false, strings.Split(w.Addr.String(), ","))
	sw.hooks.seq = &seqCheck{resolve: sw.producerSeq, resolved: sw.resentStored}
	if s.rec != nil {
		sw.hooks.seq.producer = &producerWatch{rec: s.rec}
	}
	sw.wh.counters = &sw.counters
	sw.wh.rec, sw.wh.metrics = s.rec, sw.hooks.metrics
	onFatal := sw.onFatal
	sw.hooks.onFatal.Store(&onFatal)
	sw.conf = writerConfOf(w, s)
	sw.hooks.warnAfter = sw.conf.writeTimeout
	sw.budget = &budgetClock{budget: sw.conf.budget}
	sw.autoCreate = w.AllowAutoTopicCreation
	sw.idle = make(chan struct{})
	if w.RequiredAcks == kafka.RequireNone {
		s.logger.Warn("azkafka: kafka.Writer.RequiredAcks is RequireNone (kafka-go's default): the broker does not answer produce requests, so a message lost with its connection is lost without an error; set kafka.RequireAll (idempotent, exactly once per partition) or at least kafka.RequireOne",
			"topic", w.Topic)
	}
	if s.rackAware {
		if s.az == "" {
			s.logger.Warn("azkafka: rack-aware partitioning is on but the AZ is unknown, so keyless messages use every partition; set AZKAFKA_AZ or sdk.WithAZ",
				"cause", s.azErr)
		}
		sw.rack = newRackAwareBalancer(sw.balancer, w.Topic, s.az)
		if t := s.baseTransport; t != nil && t.MetadataTTL > 0 {
			sw.rackTTL = t.MetadataTTL
		}
	}
	if sw.async {
		sw.fill = &batchFill{size: sw.conf.batchSize, waiting: map[batchKey]int{}}
	}
	sw.baseOpts = sw.writerEngineOpts(w)
	sw.idempotent.Store(idempotent)
	cl, err := kgo.NewClient(append(slices.Clip(sw.baseOpts), acksOpts(w.RequiredAcks, idempotent)...)...)
	if err != nil {
		if s.rec != nil {
			s.rec.Closed()
		}
		return nil, inCtor("NewWriter", err)
	}
	sw.client.Store(cl)
	refresh := sw.hooks.refreshMetadata
	s.policy.onPeerClose.Store(&refresh)
	return sw, nil
}

func writerConfOf(w *kafka.Writer, s *session) writerConf {
	c := writerConf{
		acks:         w.RequiredAcks,
		batchSize:    w.BatchSize,
		batchBytes:   int(w.BatchBytes),
		batchTimeout: w.BatchTimeout,
		readTimeout:  w.ReadTimeout,
		writeTimeout: w.WriteTimeout,
	}
	if c.batchSize <= 0 {
		c.batchSize = defaultBatchSize
	}
	if c.batchBytes <= 0 {
		c.batchBytes = defaultBatchBytes
	}
	if c.batchTimeout <= 0 {
		c.batchTimeout = defaultBatchTimeout
	}
	if c.readTimeout <= 0 {
		c.readTimeout = defaultWriteTimeout
	}
	if c.writeTimeout <= 0 {
		c.writeTimeout = defaultWriteTimeout
	}
	c.budget = deliveryBudget(s.retry.Attempts(), c.writeTimeout, s.retry.Backoff.Max)
	return c
}

// deliveryBudget is how long the engine keeps resending a message: the
// time the retry policy's attempts would take if each waited WriteTimeout
// and the longest backoff; at least a second (the engine's floor).
func deliveryBudget(attempts int, timeout, backoffMax time.Duration) time.Duration {
	return max(time.Duration(max(attempts, 1))*(timeout+backoffMax), time.Second)
}

// writerOptions puts the user's Transport, if any, first in opts as the
// base whose TLS, SASL, timeouts and client ID the engine keeps.
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

// writerEngineOpts maps the kafka.Writer onto kgo's producer, except for
// the acks and idempotence (acksOpts).
func (w *Writer) writerEngineOpts(kw *kafka.Writer) []kgo.Opt {
	c := w.conf
	opts := w.s.engineOpts(strings.Split(kw.Addr.String(), ","), kw.Logger, kw.ErrorLogger, w.hooks)
	timeout := max(min(c.writeTimeout, c.readTimeout), 100*time.Millisecond)
	linger := time.Duration(0) // a synchronous call is sent at once
	if w.async {
		linger = min(c.batchTimeout, time.Minute)
	}
	opts = append(opts,
		kgo.WithHooks(w.wh),
		kgo.RecordPartitioner(writerPartitioner{w}),
		kgo.ProducerBatchMaxBytes(engineBatchBytes(c.batchBytes)),
		kgo.ProducerBatchCompression(engineCodec(kw.Compression)),
		kgo.ProduceRequestTimeout(timeout),
		kgo.RequestTimeoutOverhead(timeout),
		// No RecordDeliveryTimeout: the engine counts it from a record's
		// Timestamp, the user's Message.Time. Each record's Context ends
		// its budget instead (see budgetClock).
		kgo.ProducerLinger(linger),
		// A connection closed before its first answer is retried: a
		// broker limiting connection creation (KIP-612) and an agent
		// moving clients to their zone do that to healthy clients. A
		// TLS or SASL mismatch then shows as the last cause in the
		// error of a call whose ctx ended.
		kgo.AlwaysRetryEOF(),
		// A batch whose outcome is unknown (every response lost) fails
		// once the budget is spent instead of waiting forever; it may
		// have been stored once.
		kgo.AllowIdempotentProduceCancellation(),
	)
	if kw.AllowAutoTopicCreation {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if t := w.s.baseTransport; t != nil {
		if t.IdleTimeout > 0 {
			opts = append(opts, kgo.ConnIdleTimeout(min(max(t.IdleTimeout, 100*time.Millisecond), 15*time.Minute)))
		}
		if t.MetadataTTL > 0 {
			ttl := min(max(t.MetadataTTL, 10*time.Millisecond), time.Hour)
			opts = append(opts, kgo.MetadataMaxAge(max(ttl, metadataMinAge)))
		}
	}
	return opts
}

// engineBatchBytes is the engine's cap on a record batch for BatchBytes
// (counted as kafka-go counts a message): room for any message kafka-go
// takes plus the batch header, but below the default limit of a broker
// (max.message.bytes) when BatchBytes is, so that a full batch is not
// refused; the engine's bounds, 512 bytes to 100 MiB.
func engineBatchBytes(batchBytes int) int32 {
	n := batchBytes + batchOverhead
	if batchBytes <= brokerMaxMessageBytes {
		n = min(n, brokerMaxMessageBytes)
	}
	return int32(min(max(n, 512), 100<<20))
}

// acksOpts are the engine's acks and idempotence for RequiredAcks.
func acksOpts(acks kafka.RequiredAcks, idempotent bool) []kgo.Opt {
	switch {
	case idempotent:
		// kgo keeps 5 produce requests in flight per broker with
		// idempotence (Produce v1+), its own fixed setting.
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}
	case acks == kafka.RequireAll:
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()}
	case acks == kafka.RequireOne:
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
	}
	return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}
}

// engineCodec is kafka-go's compression as the engine's codec.
func engineCodec(c kafka.Compression) kgo.CompressionCodec {
	switch c {
	case kafka.Gzip:
		return kgo.GzipCompression()
	case kafka.Snappy:
		return kgo.SnappyCompression()
	case kafka.Lz4:
		return kgo.Lz4Compression()
	case kafka.Zstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// engine is the Writer's current kgo client.
func (w *Writer) engine() *kgo.Client { return w.client.Load() }

// call is one WriteMessages: its messages, their records and outcomes,
// and, when they are reported, the grouping per partition.
type call struct {
	w       *Writer
	msgs    []kafka.Message // what balancers and Completion see
	slots   []slot
	pending atomic.Int64
	done    chan struct{} // closed when every message has its outcome
	report  bool          // Completion or async: report per partition
	// settled: Close no longer waits for the call (its messages have
	// their outcome, or it returned without them).
	settled atomic.Bool
	// failed: a message of the synchronous call failed (Stats.Errors
	// counts the call once).
	failed atomic.Bool

	mu     sync.Mutex
	queued bool // every record was handed to the engine
	groups map[int32]*group
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
	err       error
	fin       atomic.Bool // err is final
	cl        *kgo.Client // the client the record was last produced on
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
	c.slots = make([]slot, len(msgs))
	c.pending.Store(int64(len(msgs)))
	mark := w.hooks.errSeq.Load()
	w.fatalMu.Lock()
	fatal := w.fatalCh
	w.fatalMu.Unlock()
	cl := w.engine()
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
			}
		}
		pre := int32(-1)
		if parts != nil {
			if n := int(parts.Load()); n > 0 {
				if p := b.Balance(*m, w.partitionList(n)...); p >= 0 && p < n {
					pre = int32(p)
				}
			}
		}
		// Field by field: the slot is zeroed, and whole-struct stores
		// cost a write barrier over every pointer of it.
		sl.st.Context = budget
		sl.st.c, sl.st.i, sl.st.partition, sl.st.pre, sl.st.cl = c, i, -1, pre, cl
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
		// Background, not ctx: the engine fails a partition's whole
		// queue when its first record's ctx ends, which would fail
		// other callers' messages. The record's Context, its budget,
		// ends with the budget of the oldest record.
		cl.Produce(context.Background(), &sl.rec, w.promise)
	}
	if c.report {
		c.markQueued()
	}
	if w.async {
		return nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
	case <-fatal:
	}
	w.settle(c)
	return w.outcome(ctx, c, mark)
}

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
	for attempt := 0; ; attempt++ {
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
		}
		switch err := a.err; {
		case err == nil:
			return a.n, nil
		case ctx.Err() != nil:
			return 0, w.ctxError(ctx, mark)
		case isUnknownTopic(err) && attempt < unknownTopicAttempts-1:
			// A topic created a moment ago may not be known yet to the
			// broker asked; a few quick attempts ride that out.
		case errors.As(err, new(kafka.Error)), engineFatal(err), unfixable(err):
			return 0, kafkaError(err)
		}
		t := time.NewTimer(w.s.retry.Backoff.Delay(attempt))
		select {
		case <-t.C:
		case <-fatal:
			t.Stop()
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
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
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
			return len(t.Partitions), nil
		case kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition):
			return 0, nil
		}
		return 0, kafkaError(fmt.Errorf("sdk: topic %s: %w", quote(topic), err))
	}
	return 0, kafkaError(fmt.Errorf("sdk: topic %s: %w", quote(topic), kerr.UnknownTopicOrPartition))
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
	c := st.c
	if err != nil {
		err = kafkaError(err)
		if w.produceAgain(r, st, err) {
			return
		}
		err = w.deliveryError(err)
		if !c.report && c.failed.CompareAndSwap(false, true) {
			w.wh.failed.Add(1)
		}
		if w.s.rec != nil {
			w.s.rec.ProduceFailed(r.Topic, r.Partition, 1, errorType(err))
		}
	} else if !w.produced.Load() && w.idempotent.Load() {
		w.produced.Store(true)
	}
	// Counted here, not in the engine's batch hook (which may run after
	// the promise): Stats right after a call sees it. As kafka-go's,
	// Messages and Bytes count the messages written whatever the outcome.
	w.wh.messages.Add(1)
	w.wh.bytes.Add(int64(len(r.Key) + len(r.Value)))
	st.err = err
	st.fin.Store(true)
	if c.report {
		c.finished(st)
	}
	if c.pending.Add(-1) == 0 {
		if c.done != nil {
			close(c.done)
		}
		w.settle(c)
		w.outstanding.Done()
	}
}

// deliveryError is the error a message gets for err, the engine's: the
// end of its delivery budget, and Close giving it up, say so.
func (w *Writer) deliveryError(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// The budget's Context ended (the caller's ctx never reaches the
		// engine). The error the engine last met, when no broker
		// answered since, is why: a dial refused, a TLS handshake closed.
		if last := w.hooks.since(w.hooks.errSeq.Load()); last != nil {
			return fmt.Errorf("sdk: not acknowledged within the delivery budget (%v) after it was handed over: %w; last error: %w", w.conf.budget, kgo.ErrRecordTimeout, last)
		}
		return fmt.Errorf("sdk: not acknowledged within the delivery budget (%v) after it was handed over: %w", w.conf.budget, kgo.ErrRecordTimeout)
	case w.engineDone.Load() && (errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled)):
		w.gaveUp.Add(1)
		return errClosed
	}
	return err
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
	if p := w.hooks.seq.producer; p != nil {
		p.saw(-1, -1)
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

func (c *call) group(p int32) *group {
	if c.groups == nil {
		c.groups = make(map[int32]*group, 1)
	}
	g := c.groups[p]
	if g == nil {
		g = &group{}
		c.groups[p] = g
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
	c.group(p).assigned++
	c.mu.Unlock()
}

func (c *call) unassign(st *recState) {
	c.mu.Lock()
	if c.report && st.partition >= 0 {
		c.group(st.partition).assigned--
	}
	st.partition = -1
	c.mu.Unlock()
}

// finished notes st's outcome and reports its partition's messages of the
// call once all of them have theirs.
func (c *call) finished(st *recState) {
	c.mu.Lock()
	g := c.group(st.partition)
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

// reportGroup hands messages of one call and partition to Completion, one
// call per run of the same outcome, or in async mode without Completion
// logs a failure.
func (w *Writer) reportGroup(c *call, idx []int) {
	for len(idx) > 0 {
		first := &c.slots[idx[0]]
		err := first.st.err
		n := 1
		for n < len(idx) && c.slots[idx[n]].st.err == err {
			n++
		}
		run := idx[:n]
		idx = idx[n:]
		if err != nil {
			w.wh.failed.Add(1)
		}
		if w.completion == nil {
			if err != nil {
				w.s.logger.Warn("azkafka: async write failed for good; set kafka.Writer.Completion to handle failures",
					"topic", first.rec.Topic, "partition", first.rec.Partition, "messages", len(run), "error", err)
			}
			continue
		}
		out := make([]kafka.Message, len(run))
		for j, i := range run {
			sl := &c.slots[i]
			out[j] = c.msgs[i]
			out[j].Topic = sl.rec.Topic
			out[j].Partition = int(sl.rec.Partition)
			if err == nil {
				out[j].Offset = max(sl.rec.Offset, -1) // -1: stored before (seqConn)
				if out[j].Time.IsZero() {
					out[j].Time = sl.rec.Timestamp
				}
			}
		}
		w.completion(out, err)
	}
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
	part := int(st.pre)
	if parts := p.w.partsOf(r.Topic); part < 0 || part >= n || parts.Load() != int32(n) {
		parts.Store(int32(n))
		// Not chosen yet, or the topic's partitions changed since:
		// choose among the engine's.
		var b kafka.Balancer = p.w.balancer
		if p.w.rack != nil {
			b = p.w.rack
		}
		part = b.Balance(st.c.msgs[st.i], p.w.partitionList(n)...)
	}
	if part >= 0 && part < n {
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

// batchFill makes BatchSize the async Writer's trigger to send, as in
// kafka-go: once BatchSize messages wait on one partition, the waiting
// messages of every partition go without waiting for BatchTimeout (the
// engine's linger); messages that arrive while they go are sent at once
// too. The engine cuts batches by bytes, so a batch may carry more than
// BatchSize messages.
type batchFill struct {
	size    int
	mu      sync.Mutex
	waiting map[batchKey]int // messages partitioned since the last send
	sending atomic.Bool
	wg      sync.WaitGroup
}

type batchKey struct {
	topic     string
	partition int32
}

// add counts a message partitioned to topic/partition and reports whether
// the messages waiting should be sent now.
func (f *batchFill) add(topic string, partition int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := batchKey{topic, partition}
	f.waiting[k]++
	if f.waiting[k] < f.size || f.sending.Load() {
		return false
	}
	clear(f.waiting)
	return true
}

// sendNow sends every message waiting, without their linger: kgo's Flush
// hurries what is buffered and what is produced until it returns. One
// runs at a time; Close waits for it.
func (w *Writer) sendNow() {
	f := w.fill
	if !f.sending.CompareAndSwap(false, true) {
		return
	}
	cl := w.engine()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.sending.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), w.conf.budget)
		defer cancel()
		_ = cl.Flush(ctx)
	}()
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

// Close sends the messages waiting for BatchTimeout at once and waits
// until the messages of async calls and of synchronous calls still
// waiting have their outcome, but at most the Writer's WriteTimeout (10 s
// by default: set kafka.Writer.WriteTimeout to change it), and not at all
// after a refusal no retry fixes (TLS, SASL, authorization). It never
// waits for messages whose calls already returned (their ctx ended).
// Then it closes the engine: the messages it gave up on fail with an
// error saying so (Completion gets them; a synchronous call still waiting
// returns it in its kafka.WriteErrors), and it logs their count at Warn.
// Later calls to WriteMessages fail with io.ErrClosedPipe; Close returns
// nil, again on later calls.
func (w *Writer) Close() error {
	w.closeMu.Lock()
	first := w.closed.CompareAndSwap(false, true)
	w.closeMu.Unlock()
	if !first {
		return nil
	}
	start := time.Now()
	if w.awaited.Load() == 0 {
		w.idleOnce.Do(func() { close(w.idle) })
	}
	// The bound is WriteTimeout; a tenth of it (at most a second) is
	// kept for closing the engine after the wait.
	deadline := start.Add(w.conf.writeTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-min(w.conf.writeTimeout/10, time.Second)))
	defer cancel()
	w.fatalMu.Lock()
	fatal := w.fatalCh
	w.fatalMu.Unlock()
	if w.hooks.fatalError() != nil {
		cancel()
	}
	// Send what lingers; the engine's Flush waits for every buffered
	// record, so the wait below is on the calls, not on Flush.
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		_ = w.engine().Flush(ctx)
	}()
	select {
	case <-w.idle:
	case <-fatal:
	case <-ctx.Done():
	}
	cancel()
	<-flushed
	w.clientMu.Lock() // no fallback client is made from here on
	if w.idempotent.Load() {
		w.producerID() // keep the identity for Stats after Close
	}
	w.engineDone.Store(true)
	cl := w.engine()
	w.clientMu.Unlock()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		cl.Close()
		if w.fill != nil {
			w.fill.wg.Wait()
		}
		w.retired.Wait()
		w.outstanding.Wait()
		w.budget.stop()
	}()
	t := time.NewTimer(time.Until(deadline))
	select {
	case <-closed:
		t.Stop()
	case <-t.C:
		w.s.logger.Warn("azkafka: Writer.Close returned before the engine closed; it finishes in the background",
			"bound", w.conf.writeTimeout, "cause", w.hooks.since(0))
	}
	if n := w.gaveUp.Load(); n > 0 {
		w.s.logger.Warn("azkafka: Close gave up on messages not acknowledged within its wait; their calls or Completion got the error",
			"messages", n, "waited", time.Since(start).Round(time.Millisecond), "bound", w.conf.writeTimeout, "cause", w.hooks.since(0),
			"fix", "raise kafka.Writer.WriteTimeout to wait longer, and check the cluster")
	}
	if w.s.policy.onPeerClose.Load() != nil {
		w.s.policy.onPeerClose.Store(nil)
	}
	if w.s.rec != nil {
		w.s.rec.Closed()
	}
	return nil
}

// Stats returns kafka-go's writer statistics since the previous call, plus
// the SDK's counters (see SDKStats for what the engine can count).
func (w *Writer) Stats() WriterStats {
	c := w.conf
	ks := kafka.WriterStats{
		Writes:          w.wh.writes.Swap(0),
		Messages:        w.wh.messages.Swap(0),
		Bytes:           w.wh.bytes.Swap(0),
		Errors:          w.wh.failed.Swap(0),
		Dials:           w.hooks.dials.Swap(0),
		DialTime:        durationStats(&w.hooks.dialTime),
		WriteTime:       durationStats(&w.wh.writeTime),
		WaitTime:        durationStats(&w.wh.waitTime),
		BatchSize:       summaryStats(&w.wh.batchSize),
		BatchBytes:      summaryStats(&w.wh.batchBytes),
		MaxAttempts:     int64(w.s.retry.Attempts()),
		WriteBackoffMin: w.s.retry.Backoff.Min,
		WriteBackoffMax: w.s.retry.Backoff.Max,
		MaxBatchSize:    int64(c.batchSize),
		BatchTimeout:    c.batchTimeout,
		ReadTimeout:     c.readTimeout,
		WriteTimeout:    c.writeTimeout,
		RequiredAcks:    int64(c.acks),
		Async:           w.async,
		Topic:           w.topic,
		ClientID:        w.s.clientID,
	}
	sdk := w.counters.snapshot(w.s)
	ks.Retries = sdk.Retries
	sdk.Idempotent = w.idempotent.Load()
	sdk.ProducerID, sdk.ProducerEpoch = -1, -1
	if sdk.Idempotent {
		sdk.ProducerID, sdk.ProducerEpoch, sdk.EpochBumps = w.producerID()
	}
	return WriterStats{WriterStats: ks, SDK: sdk}
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

// writerHooks receives the engine's produce events behind
// kafka.WriterStats. Safe for concurrent use.
type writerHooks struct {
	counters                        *counters
	rec                             metrics.Recorder // nil without metrics
	metrics                         *metricsHooks    // nil without metrics
	writes, messages, bytes, failed atomic.Int64
	writeTime, waitTime             summary[time.Duration]
	batchSize, batchBytes           summary[int64]
	epochMu                         sync.Mutex
	lastID                          int64
	lastEpoch                       int16
	seen                            bool
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

// OnBrokerWrite counts produce requests and their write time.
func (h *writerHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, write time.Duration, err error) {
	if h.produceOK(key, err) {
		h.writes.Add(1)
		h.writeTime.observe(write)
	}
}

// OnBrokerRead times produce responses.
func (h *writerHooks) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, wait, read time.Duration, err error) {
	if h.produceOK(key, err) {
		h.waitTime.observe(wait + read)
	}
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
