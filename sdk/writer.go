package sdk

// writer.go holds the Writer: its doc (what each kafka.Writer field
// becomes), NewWriter and the engine's producer options, Close and Stats.
// It pairs with writer_call.go (one WriteMessages call, from hand-over to
// outcome and Completion), writer_async.go (BatchSize as async mode's
// trigger) and writer_idempotence.go (the idempotence decision, the
// fallback when the cluster refuses a producer ID, the producer's
// identity and the produce hooks).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

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
// connection, a refused connect, a moved leader, a broker not yet ready; a
// batch the broker found corrupt in transit, as many times as the retry
// policy tries, after its backoff: records the same partition took
// meanwhile, a later request of the same call's included, are stored
// before it where the broker takes them, where kafka-go keeps the order;
// Kafka refuses an idempotent Writer's as out of sequence) until the message is acknowledged or its delivery budget is spent: the
// retry policy's attempts × (WriteTimeout + its backoff maximum), 110 s
// with the defaults (10 × (10 s + 1 s)), in the spirit of Java's
// delivery.timeout.ms (120 s), counted from when the message was handed
// to WriteMessages (never from its Time, which may be any time: a replay's
// or a backfill's is stored as given). Attempts are not counted one by one: fast
// refusals during a leader election do not use the budget up before the
// cluster elected a new leader (about 9 s with Kafka's default broker
// session timeout). The backoff between resends is the retry policy's
// (WithRetry, AZKAFKA_RETRY_BACKOFF_*); kafka.Writer's MaxAttempts,
// WriteBackoffMin and WriteBackoffMax are not used. MaxAttempts: 1, which
// in kafka-go means a failed request is never sent again, does not stop
// these resends: under RequireOne a message whose response was lost may be
// stored twice where kafka-go's call returns the error (RequireAll makes
// the resends idempotent). A message whose budget is spent fails with an
// error matching kgo.ErrRecordTimeout and context.DeadlineExceeded (kafka-go's
// last attempt's timeout is an i/o timeout or context.DeadlineExceeded),
// when the engine next looks at its partition: between resends, within a
// backoff maximum of the budget's end, or, with a request holding it in
// flight then, once that request is answered or times out (WriteTimeout);
// a call with Background's ctx against a broker that stopped answering
// returns within about budget + WriteTimeout.
// A synchronous call still ends with its ctx. Errors that waiting cannot fix (TLS
// verification, SASL, authorization) return at once.
//
// The first call to each topic asks the cluster for it, as kafka-go does:
// a topic the cluster does not have (and does not create:
// AllowAutoTopicCreation) is kafka.UnknownTopicOrPartition at once, in
// async mode too. So is the next call to a topic after messages of it
// failed as unknown (the topic was deleted): the call asks for the topic
// again. A topic deleted and created again is written to from there on;
// the messages that met the deleted one fail. Before the Writer ever reached its cluster, bootstrap
// addresses no retry fixes (an unknown host, TLS against a plaintext port
// or the reverse, a server that is not Kafka) end the call as soon as every
// address failed so, and refusals or silence after DefaultBootstrapTimeout; the error
// is a *BootstrapError naming each address and its cause.
//
// # Calls
//
// A synchronous WriteMessages never waits for BatchTimeout, which paces
// async mode only. Its messages are sent at once when the brokers leading
// their partitions have no synchronous produce request of this Writer in
// flight; otherwise they gather with those of other concurrent calls and
// go, as one request per broker, when the request in flight is answered.
// Kafka serves one request per connection at a time and answers acks=all
// only once the followers have the batch, so on a replicated cluster many
// concurrent calls of a message or a few (the web-service pattern) make
// few large requests instead of many one-message requests queued behind
// each other, as kafka-go's per-partition batches do; a lone caller is
// sent at once, and a call's messages to one broker always travel
// together. Callers that call again as soon as they return (a goroutine
// per partition) come back one by one as a request is answered: the next
// request waits for as many of them as the last one carried, so that
// they travel together instead of the first back going alone: with r
// the last request's round trip, at most 10 ms, it waits a quarter of r,
// then on while calls keep coming (a sixteenth of r without one ends
// it), at most r. Where callers do not come back (keys spread over every
// partition, handlers that end), a wait that ends without them all turns
// the waiting off for the next 1 to 64 requests.
// Records of a partition whose leader the engine has not loaded yet (a
// topic's first calls), re-sends after an error, RequireNone
// (nothing is answered) and async mode (where the engine pipelines up to
// 5 requests per broker) do not wait so. It returns nil, kafka-go's
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
// messages wait on one partition (kafka-go's two triggers; that sends what
// waits on every partition, where kafka-go sends that partition's batch;
// the engine cuts batches by bytes, BatchBytes, counted as the engine
// counts them, so a batch may carry more than BatchSize messages). Completion, when set, receives every message once, with
// Topic, Partition and (when acknowledged with an offset: not under
// RequireNone) Offset set, Time as given: per partition, in the order the
// messages got their outcome, on a goroutine of the partition's (so that
// partitions report in parallel, and a Completion may write to another
// partition synchronously; to its own it would wait for itself, as in
// kafka-go), one call per run of messages with the same outcome ready
// together (kafka-go calls it per batch). A synchronous call returns
// after Completion got its messages, and Close waits for Completion
// within its bound. A
// message that fails for good in async mode without a Completion is
// logged at Warn, once per call and partition, naming the topic,
// partition and cause.
//
// A synchronous call holds its own messages until they are acknowledged;
// the engine buffers at most 50,000 records (kgo's MaxBufferedRecords),
// after which WriteMessages, async too, waits for room until its ctx ends
// (then it stores nothing and returns ctx's error; kafka-go's async
// buffer has no bound). A call of more messages than that hands them over
// as room frees, after the messages of earlier calls still gathering for
// the next request (which it sends at once); when its ctx ends first,
// those handed over are delivered and the others fail with an error
// matching ctx's, which Completion gets too.
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
//     land where kafka-go puts them. Default &kafka.RoundRobin{}, which
//     spreads each call's messages over the partitions; kafka-go's own
//     &kafka.RoundRobin{ChunkSize: n} gives n messages in a row one
//     partition, so that a call of n is one batch (less work per message
//     for the broker; docs/RESULTS.md, acks=0).
//   - RequiredAcks: AllISRAcks (idempotent unless turned off), LeaderAck,
//     NoAck; any other value is a NewWriter error (Kafka refuses it).
//   - MaxAttempts, WriteBackoffMin, WriteBackoffMax: not used; the retry
//     policy (AZKAFKA_RETRY_*, WithRetry) sets the backoff and, with
//     WriteTimeout, the delivery budget (the engine's
//     RecordDeliveryTimeout).
//   - BatchSize: in async mode, once BatchSize messages wait on a
//     partition they are sent without waiting for BatchTimeout (kafka-go's
//     trigger). Not a cap: the engine cuts batches by bytes only
//     (BatchBytes), so a batch may carry more; Stats().MaxBatchSize reports
//     it. A message the broker refuses whole-batch (an invalid timestamp)
//     therefore fails the other messages of its call's batch, where
//     kafka-go's BatchSize: 1 sent each alone.
//   - BatchBytes: a message larger than BatchBytes (default 1 MiB), counted
//     as kafka-go counts it, is kafka.MessageTooLargeError; the engine's
//     batches hold up to BatchBytes plus a batch header, and, uncompressed,
//     no more than Kafka's default max.message.bytes (1,048,588) unless
//     BatchBytes is larger (compressed, the broker checks the compressed
//     batch: every message kafka-go takes is sent, as kafka-go sends it).
//   - BatchTimeout: ProducerLinger in async mode (default 1 s); 0 for
//     synchronous calls.
//   - WriteTimeout, ReadTimeout: ProduceRequestTimeout and
//     RequestTimeoutOverhead (the smaller of the two, default 10 s);
//     WriteTimeout also sizes the delivery budget and bounds Close.
//   - Async, Completion: WriteMessages returns once queued;
//     Completion(messages, err) is called per partition with Partition
//     and Offset set (see above).
//   - Compression: ProducerBatchCompression (none by default, as kafka-go);
//     a batch that the codec would not make smaller is sent uncompressed
//     (a message of a few bytes, data already compressed or encrypted),
//     which every consumer reads the same (see Differences from kafka-go).
//   - Logger, ErrorLogger: the engine's log lines, Info and up to Logger,
//     Warn and up to ErrorLogger.
//   - Transport: nil or a *kafka.Transport, whose TLS, SASL, Dial,
//     DialTimeout and Resolver serve the SDK's dial; IdleTimeout becomes
//     ConnIdleTimeout, MetadataTTL MetadataMaxAge (6 s when unset, as
//     kafka-go's; also the age of the rack-aware view, see
//     WithRackAwarePartitioning), ClientID the user part of the client ID.
//     MetadataTopics is not used: the engine asks for the topics it
//     writes, where kafka-go's Writer fails a topic that list leaves out.
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
	// client is the engine calls go to. The hooks know it too (kgo tells
	// them inside kgo.NewClient, before the client is ready), so the
	// Writer keeps its own, set once NewClient has returned: a record
	// never reaches a fallback client still being built.
	client  atomic.Pointer[kgo.Client]
	retired sync.WaitGroup // clients replaced by the fallback, closing
	corrupt corruptQueue   // records to resend, see resendCorrupt
	reports reportLanes    // Completion's calls, see reportLanes

	fatalMu sync.Mutex
	fatalCh chan struct{} // closed and replaced at each refusal

	outstanding sync.WaitGroup // calls with messages not reported yet
	closeMu     sync.RWMutex
	closed      atomic.Bool // Close was called
	engineDone  atomic.Bool // the engine is closed
	counters    counters
	produced    atomic.Bool // a batch was acknowledged: the producer ID is known
	fill        *batchFill  // async mode: BatchSize as the trigger to send
	gather      *gather     // synchronous calls with acks: see gather

	budget     *budgetClock
	autoCreate bool
	// topicParts is the partition count of the Writer's Topic (nil until
	// the cluster was asked for it), known those of per-message topics
	// (topic -> *atomic.Int32); a count of 0 leaves the choice to the
	// engine's partitioner.
	topicParts atomic.Pointer[atomic.Int32]
	known      sync.Map
	// topicIDs is the ID the cluster gave each topic when the Writer
	// last looked it up (under topicIDsMu): a new one is a topic
	// deleted and made again, which the engine refuses until it is
	// purged from it (see noteTopicID).
	topicIDsMu sync.Mutex
	topicIDs   map[string][16]byte
	// awaited counts the calls Close waits for: async calls and
	// synchronous calls still waiting, until their messages have their
	// outcome; idle is closed when it drops to 0 after Close began.
	awaited  atomic.Int64
	idleOnce sync.Once
	idle     chan struct{}
	// closeDone is closed when the first Close returns: later calls
	// wait for it.
	closeDone chan struct{}
	// closing is closed when Close begins: a call looking its topic up
	// stops (io.ErrClosedPipe).
	closing chan struct{}
	// gaveUp counts the messages Close failed.
	gaveUp atomic.Int64
	// unsettled counts the records of calls handed over, or being
	// handed over, without their outcome: the engine's buffer holds at
	// most one more (the record whose promise runs; see waitRoom).
	unsettled atomic.Int64
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
	// defaultMetadataTTL is kafka-go's MetadataTTL when the Transport sets
	// none: how old the Writer's metadata and the leaders' racks of
	// rack-aware partitioning may grow.
	defaultMetadataTTL = 6 * time.Second
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
// nil, has no Addr, has RequiredAcks other than -1, 1 and 0, has a
// Compression kafka-go has no codec for (other than 0 to 4), has an
// unsupported Transport, or when the configuration
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
	switch w.RequiredAcks {
	case kafka.RequireAll, kafka.RequireOne, kafka.RequireNone:
	default:
		return nil, inCtor("NewWriter", fmt.Errorf("kafka.Writer.RequiredAcks is %d: Kafka takes kafka.RequireAll (-1), kafka.RequireOne (1) or kafka.RequireNone (0) (kafka-go's Writer sends %d and every message fails with INVALID_REQUIRED_ACKS)",
			int(w.RequiredAcks), int(w.RequiredAcks)))
	}
	if w.Compression < kafka.Compression(0) || w.Compression > kafka.Zstd {
		return nil, inCtor("NewWriter", fmt.Errorf("kafka.Writer.Compression is %d: kafka-go has kafka.Gzip (1), kafka.Snappy (2), kafka.Lz4 (3) and kafka.Zstd (4), or 0 for none (kafka-go's Writer marks its batches with %d and the broker refuses every message as CORRUPT_MESSAGE)",
			int(w.Compression), int(w.Compression)))
	}
	base, ok := w.Transport.(*kafka.Transport)
	if !ok && w.Transport != nil {
		return nil, inCtor("NewWriter", fmt.Errorf("kafka.Writer.Transport is a %T; only a *kafka.Transport can carry the client ID and connection policy", w.Transport))
	}
	s, err := newSession(context.Background(), append([]Option{forCtor(ctorWriter)}, withBaseTransport(base, opts)...))
	if err != nil {
		return nil, inCtor("NewWriter", err)
	}
	idempotent, why, err := idempotenceDecision(w.RequiredAcks, s.idempotence)
	if err != nil {
		return nil, inCtor("NewWriter", err)
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
		rackTTL:    defaultMetadataTTL,
	}
	if sw.balancer == nil {
		sw.balancer = &kafka.RoundRobin{}
	}
	sw.promise = sw.onRecord
	sw.hooks = startClient(s, metrics.Client{Kind: metrics.KindWriter, Topic: w.Topic, Idempotent: idempotent},
		&sw.counters, false, strings.Split(w.Addr.String(), ","))
	if idempotent {
		// Only an idempotent producer's batches have sequences to check
		// (a Writer turns idempotence off, never on): a Writer without
		// it writes its requests unparsed.
		sw.hooks.seq = &seqCheck{resolve: sw.producerSeq, resolved: sw.resentStored}
		if s.rec != nil {
			sw.hooks.seq.producer = &producerWatch{rec: s.rec}
		}
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
	sw.closeDone = make(chan struct{})
	sw.closing = make(chan struct{})
	if w.RequiredAcks == kafka.RequireNone {
		s.logger.Warn("azkafka: kafka.Writer.RequiredAcks is RequireNone (kafka-go's default): the broker does not answer produce requests, so a message lost with its connection is lost without an error; set kafka.RequireAll (idempotent, exactly once per partition) or at least kafka.RequireOne",
			"topic", w.Topic)
	}
	if s.rackAware {
		sw.rackAware(w.Topic)
	}
	if sw.async {
		sw.fill = &batchFill{size: sw.conf.batchSize, waiting: map[batchKey]int{}}
	} else if w.RequiredAcks != kafka.RequireNone && !gatherOff.Load() {
		sw.gather = newGather(sw)
	}
	sw.baseOpts = sw.writerEngineOpts(w)
	sw.idempotent.Store(idempotent)
	cl, err := kgo.NewClient(append(slices.Clip(sw.baseOpts), acksOpts(w.RequiredAcks, idempotent)...)...)
	if err != nil {
		s.stop()
		return nil, inCtor("NewWriter", err)
	}
	sw.client.Store(cl)
	s.engineUp(sw.hooks)
	return sw, nil
}

// rackAware turns on rack-aware partitioning (WithRackAwarePartitioning)
// of the Writer's keyless messages to topic ("": per message).
func (w *Writer) rackAware(topic string) {
	s := w.s
	if s.az == "" {
		s.logger.Warn("azkafka: rack-aware partitioning is on but the AZ is unknown, so keyless messages use every partition; set AZKAFKA_AZ or sdk.WithAZ",
			"cause", s.azErr)
	}
	w.rack = newRackAwareBalancer(w.balancer, topic, s.az)
	if t := s.baseTransport; t != nil && t.MetadataTTL > 0 {
		w.rackTTL = t.MetadataTTL
	}
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
	per := timeout + backoffMax
	if per < 0 || per > 0 && max(attempts, 1) > int(maxDeliveryBudget/per) {
		return maxDeliveryBudget // the product would overflow
	}
	return max(time.Duration(max(attempts, 1))*per, time.Second)
}

// maxDeliveryBudget bounds the delivery budget, so that a deadline that
// far off is still a time: 100 years, no end in practice.
const maxDeliveryBudget = 100 * 365 * 24 * time.Hour

// engine is the Writer's current kgo client.
func (w *Writer) engine() *kgo.Client { return w.client.Load() }

// Close sends the messages waiting for BatchTimeout, and those of
// synchronous calls held for returning callers (see Calls), at once and
// waits until the messages of async calls and of synchronous calls still
// waiting have their outcome, but at most the Writer's WriteTimeout (10 s
// by default: set kafka.Writer.WriteTimeout to change it), and not at all
// after a refusal no retry fixes (TLS, SASL, authorization). It never
// waits for messages whose calls already returned (their ctx ended).
// Then it closes the engine: the messages it gave up on fail with an
// error saying so (Completion gets them; a synchronous call still waiting
// returns it in its kafka.WriteErrors), and it logs their count at Warn.
// Once it returns, the batches acknowledged are in Stats and have reached
// WithMetrics' Recorder (the engine reports them on a goroutine of its
// own; Close waits for that up to a second, within its bound).
// Later calls to WriteMessages fail with io.ErrClosedPipe; Close returns
// nil, again on later calls, which return once the first has.
func (w *Writer) Close() error {
	w.closeMu.Lock()
	first := w.closed.CompareAndSwap(false, true)
	w.closeMu.Unlock()
	if !first {
		// Another Close is at work: return once it has (a program that
		// closes in a signal handler and in a defer exits after the
		// messages were sent, as with kafka-go's).
		<-w.closeDone
		return nil
	}
	defer close(w.closeDone)
	close(w.closing)
	start := time.Now()
	if w.gather != nil {
		w.gather.flush()
	}
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
		if w.gather != nil {
			w.gather.wg.Wait()
		}
		w.retired.Wait()
		w.corrupt.wg.Wait()
		w.outstanding.Wait()
		w.wh.awaitHooks()
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
	w.s.stop()
	return nil
}

// Stats returns kafka-go's writer statistics since the previous call, plus
// the SDK's counters (see SDKStats for what the engine can count). Where
// they count otherwise than kafka-go's: Writes counts produce requests
// (kafka-go's, partition batches: a request carries a batch per
// partition); Messages and Bytes count each message once, at its outcome,
// and Errors, for each call, the partitions where its messages failed
// (kafka-go's count every attempt: a resent batch's messages twice, each
// failed attempt of a partition's batch an error); Bytes
// counts the messages' keys and values (kafka-go's, their encoded size);
// WriteTime is each produce request's round trip, as kafka-go's, and
// WaitTime the throttle times brokers imposed on the Writer's requests,
// observed only when there was one (kafka-go's observes every produce
// response's, mostly 0; the engine reports a throttle without its
// request, so a quota on metadata requests counts too); BatchTime and BatchQueueTime stay zero (the engine
// does not time them); MaxAttempts, WriteBackoffMin and WriteBackoffMax
// report the retry policy, which applies in their place; Dials counts the
// Writer's connections (kafka-go's Writer reports none); ClientID is the
// client ID the Writer sends (kafka-go's Stats leave it empty). BatchSize
// and BatchBytes count the batches brokers acknowledged (kafka-go's, every
// batch written), BatchBytes as the engine measures a batch: its records
// uncompressed, with their framing. The engine reports a batch's
// BatchSize and BatchBytes on a goroutine of its own: a Stats call right
// after a synchronous call may count its batches in the next call's
// figures.
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
