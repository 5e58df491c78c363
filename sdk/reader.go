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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/retry"
)

// Reader is a drop-in replacement for *kafka.Reader: the same methods with
// kafka-go's meaning, configured by kafka.ReaderConfig, running on
// franz-go's consumer (kgo). One fetch per broker carries all of its
// partitions and whole record batches are decoded at once, so a Reader
// with periodic commits reads about 2.4 times as fast as kafka-go's (with
// a synchronous commit per message or per batch, the commit round trips
// bound both alike), and it closes in milliseconds on a healthy cluster
// (kafka-go's waits out MaxWait), within ReaderCloseTimeout on any.
// Create it with NewReader; the zero value
// is not usable. Its methods are safe for concurrent use.
//
// Modes, as in kafka-go: with ReaderConfig.GroupID it is a member of a
// consumer group reading Topic or GroupTopics (Offset, Lag, SetOffset,
// SetOffsetAt and ReadLag are then unavailable, as in kafka-go); without,
// it reads Partition of Topic from the first offset, or from where
// SetOffset or SetOffsetAt puts it.
//
// Group protocol: classic by default, where the group's leader member
// assigns with ReaderConfig.GroupBalancers (default range, then
// round-robin), exactly as kafka-go's members do, so a group can mix
// sdk.Readers and kafka-go Readers, or move from one to the other member by
// member; or KIP-848's consumer protocol (WithGroupProtocol), where the
// broker assigns and GroupBalancers are ignored.
//
// Fetch from follower: when the AZ is known (and AZKAFKA_FETCH_FROM_FOLLOWER
// is not false) every fetch carries the AZ as its rack ID (KIP-392), so
// brokers running the RackAwareReplicaSelector serve each partition from
// the replica in the client's zone, whichever broker leads it. The leader
// then only names the replica. When that replica dies, kgo would keep
// fetching from it (and a leader keeps naming it until the cluster fences
// it): instead, once a dial or a request to a broker of the own zone
// fails, the Reader fetches without its rack ID (see ZoneFallbackHold),
// and within RecheckPreferredReplica the partitions go back to their
// leaders, which serve them until the zone's broker answers again.
// Measured on Kafka 4.3.1 (TestClusterFetchFromFollower): after a kill -9
// of the replica, reading paused 4.6-5.0 s; a hung replica (SIGSTOP) is
// noticed only when a fetch to it times out, MaxWait + 10 s. A replica that lags
// serves what it has: reads are never ahead of the leader's high
// watermark. Stats().SDK counts the bytes fetched from each broker and the
// share from the own zone.
//
// Commits follow kafka-go: CommitMessages commits each partition's
// highest given offset + 1. With CommitInterval 0 it is synchronous; with
// CommitInterval > 0 it only marks, and the marks are committed every
// interval, before a partition is revoked, and in Close. ReadMessage is
// FetchMessage followed by CommitMessages.
//
// Nothing is skipped: the Reader hands out every record of a partition in
// order from where the group's committed offset (or SetOffset) put it, and
// commits only offsets the caller gave back, so the committed offset never
// passes a message the caller was not given. Records of a partition that
// was revoked meanwhile are dropped, not handed out: its next owner starts
// at the committed offset. Offsets that hold no record (compacted away,
// transaction markers) are passed over, as in kafka-go.
//
// Errors: the engine retries what is transient (closed or reset
// connections, leader moves, a coordinator loading) on its own; the Reader
// logs what it absorbed (rate-limited, at most one line per 5 s). When the
// caller's ctx ends meanwhile, the error wraps ctx's error and names the
// last cause: "context deadline exceeded; last error: dial tcp
// 127.0.0.1:1: connect: connection refused"; like kafka-go's, it matches
// ctx's error and nothing else. Errors that waiting cannot fix return at
// once: authentication, TLS, authorization, an offset out of range with
// OffsetOutOfRangeError. Before the Reader ever reached its cluster,
// bootstrap addresses no retry fixes (an unknown host, TLS against a
// plaintext port or the reverse, a server that is not Kafka) end the read
// as soon as every address failed so, and refusals after
// DefaultBootstrapTimeout (a *BootstrapError); once the cluster has been
// unreachable for longer than MaxWait, the errors absorbed are logged at
// Warn. Kafka error codes match kafka-go's (errors.Is(err,
// kafka.GroupAuthorizationFailed)). io.EOF is returned only after Close.
//
// # kafka.ReaderConfig fields
//
// What each field of the kafka.ReaderConfig given to NewReader becomes on
// the engine (kafka-go's default in parentheses):
//
//   - Brokers: the seed brokers.
//   - GroupID, GroupTopics, Topic, Partition: with GroupID, a group member
//     consuming GroupTopics or Topic; without, Partition of Topic (Offset,
//     Lag, SetOffset, SetOffsetAt and ReadLag only then, as in kafka-go).
//   - Dialer (kafka.DefaultDialer): ClientID is the user part of the
//     client ID; TLS the handshake in the SDK's dial (ServerName defaults
//     to the broker's host); SASLMechanism any kafka-go mechanism (PLAIN,
//     SCRAM, AWS MSK IAM, yours) adapted to the engine, sasl.WithMetadata
//     carrying host and port; Timeout and Deadline bound each dial and
//     handshake; DialFunc, LocalAddr, KeepAlive, FallbackDelay and Resolver
//     make the dial under the connection policy; TransactionalID is
//     ignored (a Reader produces nothing).
//   - QueueCapacity (100): records taken from the engine per poll;
//     Stats().QueueLength is what is left of them.
//   - MinBytes (1), MaxBytes (1 MB), MaxWait (10 s): the fetch's min
//     bytes, max bytes per partition and max wait; a response per broker
//     holds up to max(MaxBytes, DefaultFetchMaxBytes). Close never waits
//     for MaxWait.
//   - IsolationLevel (read uncommitted): the fetch isolation level
//     (ReadLag and SetOffsetAt list offsets with it).
//   - StartOffset (FirstOffset): where a group member starts on a partition
//     with no committed offset.
//   - OffsetOutOfRangeError (false): an offset (SetOffset) below the log's
//     start reads from the start, as in kafka-go; one past its end is
//     waited for until the log reaches it, or with true is
//     kafka.OffsetOutOfRange.
//   - CommitInterval (0): 0 makes CommitMessages synchronous; > 0 marks,
//     committed every interval, before a partition is revoked and in Close
//     (within 10 s).
//   - GroupBalancers (range, round-robin): classic protocol, each one with
//     its protocol name and user data; consumer protocol, ignored but for
//     the assignor the broker is asked for (see GroupProtocolConsumer).
//   - HeartbeatInterval (3 s), SessionTimeout (30 s), RebalanceTimeout
//     (30 s): the classic group's heartbeat interval, session and rebalance
//     timeouts; RebalanceTimeout also bounds the commit before a
//     revocation.
//   - WatchPartitionChanges, PartitionWatchInterval (5 s): new partitions
//     are always picked up at the engine's metadata refresh (5 min); with
//     WatchPartitionChanges, every PartitionWatchInterval.
//   - Logger, ErrorLogger: the engine's log lines, Info and up to Logger,
//     Warn and up to ErrorLogger (slog gets them at Debug); what the SDK
//     absorbs it logs itself at Info, once per 5 s.
//   - JoinGroupBackoff, ReadBackoffMin, ReadBackoffMax, MaxAttempts:
//     ignored; the engine backs off with the SDK's retry policy
//     (AZKAFKA_RETRY_BACKOFF_*) and waits for the cluster until ctx is
//     done.
//   - ReadBatchTimeout, ReadLagInterval: ignored; whole responses are read
//     within MaxWait plus the engine's 10 s request overhead, and lag comes
//     from each fetch's high watermark.
//   - RetentionTime: ignored; Kafka 2.1 and later keep offsets for
//     offsets.retention.minutes.
type Reader struct {
	s      *session
	config kafka.ReaderConfig
	// shown is config as kafka-go's Config returns it: the defaults its
	// NewReader applies, not its consumer group's.
	shown kafka.ReaderConfig
	hooks *engineHooks
	group bool
	// rangeFirst: the config listed kafka.RangeGroupBalancer first
	// (GroupProtocolConsumer then asks the broker for range).
	rangeFirst bool

	// pollSem admits one poller of the engine at a time.
	pollSem chan struct{}

	mu sync.Mutex
	// buf holds the records of the last poll not yet handed out, from
	// head on.
	buf  []fetched
	head int
	// moves counts SetOffset calls (partition mode): a poll that began
	// before one keeps none of its records. In group mode a poll keeps
	// the records of the partitions owned when it returns.
	moves uint64
	owned map[topicPartition]struct{}
	// marks are the offsets CommitMessages marked with CommitInterval >
	// 0, not yet committed; lastMarks is marks[lastMarksTopic], the map a
	// run of one topic's messages marks into.
	marks          map[string]map[int32]kgo.EpochOffset
	lastMarks      map[int32]kgo.EpochOffset
	lastMarksTopic string
	// handed and handedBytes count the messages handed out (key and
	// value bytes) since the last Stats.
	handed, handedBytes int64
	// Partition mode: the next offset to hand out (or FirstOffset,
	// LastOffset before the first), its lag, and whether the engine
	// consumes the partition yet.
	offset  int64
	lag     int64
	started bool
	// waits counts the checks while the offset is past the log's end.
	waits atomic.Int64
	// pollCancel interrupts the poll in flight (SetOffset, Close, a
	// refusal).
	pollCancel context.CancelCauseFunc

	// protocolChecked: the cluster's support of GroupProtocolConsumer
	// was read; classicOnly: it has none, and the engine fell back.
	protocolChecked atomic.Bool
	classicOnly     atomic.Bool

	closed     atomic.Bool
	closeOnce  sync.Once
	commitStop chan struct{}
	commitDone chan struct{}
	counters   counters
	stats      readerCounters
	rebalances atomic.Int64
}

type fetched struct {
	rec *kgo.Record
	hwm int64
}

type topicPartition struct {
	topic     string
	partition int32
}

// readerCounters hold kafka.ReaderStats' counters between two Stats calls.
type readerCounters struct {
	errors, timeouts      atomic.Int64
	fetchSize, fetchBytes summary[int64]
}

// Defaults kafka-go applies to a ReaderConfig, which the Reader applies the
// same way.
const (
	defaultReaderMaxBytes       = 1e6
	defaultReaderMaxWait        = 10 * time.Second
	defaultReaderQueueCapacity  = 100
	defaultReaderSession        = 30 * time.Second
	defaultReaderRebalance      = 30 * time.Second
	defaultReaderHeartbeat      = 3 * time.Second
	defaultPartitionWatch       = 5 * time.Second
	defaultReaderReadBatch      = 10 * time.Second
	defaultReaderReadLag        = time.Minute
	defaultReaderReadBackoffMin = 100 * time.Millisecond
	defaultReaderReadBackoffMax = time.Second
	defaultReaderMaxAttempts    = 3
)

// DefaultFetchMaxBytes caps the bytes one fetch response may carry from
// one broker (the engine's fetch.max.bytes), unless
// kafka.ReaderConfig.MaxBytes, the cap per partition, is larger. Per
// broker the Reader reads one response while it holds at most one more,
// so its memory is bounded by brokers × 2 × this, as the records crossed
// the network: compressed batches grow by their compression ratio when
// decoded, and the garbage collector lets the heap reach twice what is
// live. Measured on Kafka 4.3.1 reading 64 MiB of 1 KiB incompressible
// values from one broker (TestSDKReaderMemory): the Go heap peaked 32 MiB
// above its start with 1 partition, 79 MiB with 100.
const DefaultFetchMaxBytes = 16 << 20

// RecheckPreferredReplica is how long the Reader reads from a preferred
// replica (fetch from follower) before it asks the leader again which
// replica to read from. A replica that stops answering is left at the
// next recheck.
const RecheckPreferredReplica = 5 * time.Second

// ReaderCloseTimeout bounds Reader.Close: the commit of the marked
// offsets and the leave of the group it makes, whatever the cluster's
// state.
const ReaderCloseTimeout = 10 * time.Second

// NewReader returns a Reader for config:
//
//	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "billing", Topic: "events"})
//
// Every connection carries the azkafka client ID and goes through the
// connection policy. TLS, SASL (any kafka-go sasl.Mechanism), Timeout,
// Deadline, Resolver, DialFunc and ClientID (as the user part of the
// client ID) of config.Dialer, when set, are kept. A
// ZoneAffinityGroupBalancer in config.GroupBalancers whose Zone is empty
// gets the Reader's AZ. Options win over AZKAFKA_* environment variables.
// What each ReaderConfig field becomes is listed in the Reader doc.
//
// Unlike kafka.NewReader, which panics, NewReader returns an error for an
// invalid config, options or environment. It may detect the availability
// zone (once per process) unless WithAZ or AZKAFKA_AZ gives it. It does not
// wait for the cluster: connection errors come from the reads.
func NewReader(config kafka.ReaderConfig, opts ...Option) (*Reader, error) {
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("sdk: NewReader: invalid kafka.ReaderConfig: %w", err)
	}
	rangeFirst := len(config.GroupBalancers) > 0 && isRange(config.GroupBalancers[0])
	var shown kafka.ReaderConfig
	if err := readerDefaults(&config, &shown); err != nil {
		return nil, fmt.Errorf("sdk: NewReader: invalid kafka.ReaderConfig: %w", err)
	}
	s, err := newSession(context.Background(), append([]Option{forCtor(ctorReader)}, readerOptions(config.Dialer, opts)...))
	if err != nil {
		return nil, inCtor("NewReader", err)
	}
	config.GroupBalancers = withZone(config.GroupBalancers, s.az)
	shown.GroupBalancers = config.GroupBalancers
	r := &Reader{
		s:      s,
		config: config,
		shown:  shown,

		group:      config.GroupID != "",
		rangeFirst: rangeFirst,
		pollSem:    make(chan struct{}, 1),
		owned:      map[topicPartition]struct{}{},
		marks:      map[string]map[int32]kgo.EpochOffset{},
		offset:     kafka.FirstOffset,
		commitStop: make(chan struct{}),
		commitDone: make(chan struct{}),
	}
	s.startRecorder(metrics.Client{Kind: metrics.KindReader, Topic: config.Topic, Group: config.GroupID, FetchFromFollower: s.fetchFollower})
	r.hooks = newEngineHooks(s, &r.counters, true, config.Brokers)
	r.hooks.warnAfter = config.MaxWait
	if s.fetchFollower {
		r.hooks.zone = newZoneFallback(s.az, s.logger)
		r.hooks.zone.rec = s.rec
	}
	onFatal := r.interrupt
	r.hooks.onFatal.Store(&onFatal)
	r.config.Dialer = s.dialer()
	r.shown.Dialer = r.config.Dialer
	// The hooks keep the client (see engine).
	if _, err := kgo.NewClient(r.engineOpts()...); err != nil {
		if s.rec != nil {
			s.rec.Closed()
		}
		return nil, inCtor("NewReader", err)
	}
	refresh := r.hooks.refreshMetadata
	s.policy.onPeerClose.Store(&refresh)
	if r.group && config.CommitInterval > 0 {
		go r.commitLoop()
	} else {
		close(r.commitDone)
	}
	return r, nil
}

func isRange(b kafka.GroupBalancer) bool {
	switch b.(type) {
	case kafka.RangeGroupBalancer, *kafka.RangeGroupBalancer:
		return true
	}
	return false
}

// engine is the Reader's kgo client, known from before kgo.NewClient
// returns (its group goroutine may run the balancer first).
func (r *Reader) engine() *kgo.Client { return r.hooks.client.Load() }

// readerDefaults applies kafka-go's defaults to config, and sets shown to
// config with those kafka-go's NewReader applies, which its Config
// returns.
func readerDefaults(c, shown *kafka.ReaderConfig) error {
	if c.GroupID != "" && len(c.GroupBalancers) == 0 {
		c.GroupBalancers = []kafka.GroupBalancer{kafka.RangeGroupBalancer{}, kafka.RoundRobinGroupBalancer{}}
	}
	setDefault := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultReaderMaxBytes
	}
	if c.MinBytes == 0 {
		c.MinBytes = 1
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = defaultReaderQueueCapacity
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultReaderMaxAttempts
	}
	setDefault(&c.MaxWait, defaultReaderMaxWait)
	setDefault(&c.ReadBatchTimeout, defaultReaderReadBatch)
	setDefault(&c.ReadLagInterval, defaultReaderReadLag)
	setDefault(&c.ReadBackoffMin, defaultReaderReadBackoffMin)
	setDefault(&c.ReadBackoffMax, defaultReaderReadBackoffMax)
	*shown = *c // what kafka-go's NewReader sets; the group's defaults come from its consumer group
	setDefault(&c.HeartbeatInterval, defaultReaderHeartbeat)
	setDefault(&c.SessionTimeout, defaultReaderSession)
	setDefault(&c.RebalanceTimeout, defaultReaderRebalance)
	setDefault(&c.PartitionWatchInterval, defaultPartitionWatch)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HeartbeatInterval", c.HeartbeatInterval}, {"SessionTimeout", c.SessionTimeout},
		{"RebalanceTimeout", c.RebalanceTimeout}, {"JoinGroupBackoff", c.JoinGroupBackoff},
		{"RetentionTime", c.RetentionTime}, {"PartitionWatchInterval", c.PartitionWatchInterval},
		{"CommitInterval", c.CommitInterval}, {"MaxWait", c.MaxWait},
		{"ReadBatchTimeout", c.ReadBatchTimeout},
		{"ReadBackoffMin", c.ReadBackoffMin}, {"ReadBackoffMax", c.ReadBackoffMax},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s %v is negative", d.name, d.v)
		}
	}
	if c.StartOffset != 0 && c.StartOffset != kafka.FirstOffset && c.StartOffset != kafka.LastOffset {
		return fmt.Errorf("StartOffset %d: want kafka.FirstOffset or kafka.LastOffset", c.StartOffset)
	}
	if c.ReadBackoffMax < c.ReadBackoffMin {
		return fmt.Errorf("ReadBackoffMax %v smaller than ReadBackoffMin %v", c.ReadBackoffMax, c.ReadBackoffMin)
	}
	if c.MaxWait < time.Millisecond {
		return fmt.Errorf("MaxWait %v is below 1ms", c.MaxWait)
	}
	if c.MaxBytes > 1<<30 {
		return fmt.Errorf("MaxBytes %d is above 1 GiB", c.MaxBytes)
	}
	return nil
}

// engineOpts maps the ReaderConfig onto kgo's consumer.
func (r *Reader) engineOpts() []kgo.Opt {
	c := r.config
	fetchMax := max(c.MaxBytes, DefaultFetchMaxBytes)
	// A broker may exceed fetch.max.bytes by a record batch (KIP-74).
	r.s.maxResponse = max(r.s.maxResponse, fetchMax+fetchMax/2)
	opts := r.s.engineOpts(c.Brokers, c.Logger, c.ErrorLogger, r.hooks)
	opts = append(opts,
		kgo.FetchMaxWait(c.MaxWait),
		kgo.FetchMinBytes(int32(c.MinBytes)),
		kgo.FetchMaxPartitionBytes(int32(c.MaxBytes)),
		kgo.FetchMaxBytes(int32(fetchMax)),
	)
	if c.IsolationLevel == kafka.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if r.s.fetchFollower {
		opts = append(opts, kgo.Rack(r.s.az), kgo.RecheckPreferredReplicaInterval(RecheckPreferredReplica))
	}
	if c.OffsetOutOfRangeError {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	} else {
		// kafka-go moves a reader below the log start to the first
		// offset; past the end, it waits there for the log to grow
		// (kgo then validates the leader epoch, or resets to the end).
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if !r.group {
		return opts
	}
	topics := c.GroupTopics
	if len(topics) == 0 {
		topics = []string{c.Topic}
	}
	start := kgo.NewOffset().AtStart()
	if c.StartOffset == kafka.LastOffset {
		start = kgo.NewOffset().AtEnd()
	}
	opts = append(opts,
		kgo.ConsumerGroup(c.GroupID),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeStartOffset(start),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.RebalanceTimeout(c.RebalanceTimeout),
		kgo.HeartbeatInterval(c.HeartbeatInterval),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	)
	if c.WatchPartitionChanges {
		opts = append(opts, kgo.MetadataMaxAge(max(c.PartitionWatchInterval, metadataMinAge)))
	}
	if r.s.groupProtocol == GroupProtocolConsumer {
		// The broker assigns: range when the config lists range first,
		// else Kafka's default uniform assignor.
		b := kgo.CooperativeStickyBalancer()
		if r.rangeFirst {
			b = kgo.RangeBalancer()
		}
		return append(opts, kgo.Balancers(b), kgo.ServerSideBalancer())
	}
	bs := make([]kgo.GroupBalancer, 0, len(c.GroupBalancers))
	for _, b := range c.GroupBalancers {
		bs = append(bs, &groupBalancer{b: b, partitions: r.partitions, onError: r.hooks.noteError})
	}
	return append(opts, kgo.Balancers(bs...))
}

// partitions reads the topics' partitions, leaders and replicas.
func (r *Reader) partitions(ctx context.Context, topics []string) ([]kafka.Partition, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, r.engine())
	if err != nil {
		return nil, err
	}
	return partitionsFromMetadata(resp), nil
}

// ReadMessage reads the next message and, with a consumer group, commits
// it, like kafka.Reader.ReadMessage. When the fetch succeeded but the
// commit did not (ctx done, or an error that is not transient), it returns
// the message together with the error, so that the caller can still
// process it (kafka-go drops it): the commit may have been stored.
func (r *Reader) ReadMessage(ctx context.Context) (kafka.Message, error) {
	if r.group && r.config.CommitInterval > 0 {
		// Marking needs no round trip: hand out and mark under one lock.
		f, err := r.next(ctx, true)
		if err != nil {
			return kafka.Message{}, fmt.Errorf("fetching message: %w", err)
		}
		return message(f), nil
	}
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
// kafka.Reader.FetchMessage. It blocks until a message is there, ctx is
// done (see Reader for the error then), the Reader is closed (io.EOF), or
// an error waiting cannot fix.
func (r *Reader) FetchMessage(ctx context.Context) (kafka.Message, error) {
	f, err := r.next(ctx, false)
	if err != nil {
		return kafka.Message{}, err
	}
	return message(f), nil
}

// next hands out the next record, polling the engine when none is
// buffered; with mark, it also marks the record's offset for the next
// periodic commit (a record handed out under the lock is of a partition
// the Reader owns: drop removes the others' under the same lock).
func (r *Reader) next(ctx context.Context, mark bool) (fetched, error) {
	start := r.hooks.errSeq.Load()
	for {
		if r.closed.Load() {
			return fetched{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			// Nothing is handed out on an ended ctx: the message stays
			// for the next call (kafka-go's returns ctx's error at least
			// when no message is ready).
			return fetched{}, r.ctxError(ctx, start)
		}
		r.mu.Lock()
		if r.head < len(r.buf) {
			f := r.buf[r.head]
			r.buf[r.head] = fetched{}
			r.head++
			r.handed++
			r.handedBytes += int64(len(f.rec.Key) + len(f.rec.Value))
			if mark {
				r.markLocked(f.rec.Topic, f.rec.Partition, f.rec.Offset)
			}
			if !r.group {
				r.offset = f.rec.Offset + 1
				r.lag = max(f.hwm-r.offset, 0)
			}
			r.mu.Unlock()
			return f, nil
		}
		r.mu.Unlock()
		if err := r.poll(ctx, start); err != nil {
			return fetched{}, err
		}
	}
}

// markLocked marks offset+1 of topic's partition for the next commit,
// unless a higher mark is there. r.mu is held.
func (r *Reader) markLocked(topic string, partition int32, offset int64) {
	ps := r.lastMarks
	if ps == nil || r.lastMarksTopic != topic {
		ps = r.marks[topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			r.marks[topic] = ps
		}
		r.lastMarks, r.lastMarksTopic = ps, topic
	}
	if cur, ok := ps[partition]; !ok || offset+1 > cur.Offset {
		ps[partition] = kgo.EpochOffset{Epoch: -1, Offset: offset + 1}
	}
}

// message converts a record to kafka-go's Message.
func message(f fetched) kafka.Message {
	rec := f.rec
	m := kafka.Message{
		Topic:         rec.Topic,
		Partition:     int(rec.Partition),
		Offset:        rec.Offset,
		HighWaterMark: f.hwm,
		Key:           orNil(rec.Key),
		Value:         orNil(rec.Value),
		Time:          messageTime(rec.Timestamp),
	}
	if len(rec.Headers) > 0 {
		m.Headers = make([]kafka.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			m.Headers[i] = kafka.Header{Key: h.Key, Value: orNil(h.Value)}
		}
	}
	return m
}

// orNil is b, or nil when it is empty: kafka-go's Reader hands out an
// empty key, value or header value as nil.
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// messageTime is a record's timestamp as kafka-go's Reader gives it: in
// UTC, and the zero Time for a timestamp at or before the epoch.
func messageTime(t time.Time) time.Time {
	ms := t.UnixMilli()
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// poll refills the buffer from the engine, or returns why it could not.
func (r *Reader) poll(ctx context.Context, mark int64) error {
	select {
	case r.pollSem <- struct{}{}:
	case <-ctx.Done():
		return r.ctxError(ctx, mark)
	}
	defer func() { <-r.pollSem }()
	r.hooks.rearm()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	if r.head < len(r.buf) || r.closed.Load() {
		r.mu.Unlock()
		return nil // another caller's poll filled it, or Close ran
	}
	moves := r.moves
	r.pollCancel = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.pollCancel = nil
		r.mu.Unlock()
	}()
	if err := r.hooks.fatalError(); err != nil {
		return err
	}
	started, err := r.start(pctx)
	if err == nil && !started {
		// The offset is past the partition's end: wait for the log to
		// reach it, as kafka-go does, checking again after a backoff.
		err = retry.SleepContext(pctx, r.waitBackoff())
	}
	if err != nil || !started {
		return r.interrupted(ctx, pctx, mark, err)
	}
	r.checkGroupProtocol(pctx)
	fs := r.engine().PollRecords(pctx, r.config.QueueCapacity)

	r.mu.Lock()
	r.buf, r.head = r.buf[:0], 0
	var n, bytes int64
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		tp := topicPartition{p.Topic, p.Partition}
		if r.group {
			// A partition revoked while this poll ran and owned again
			// was restarted by the engine at the committed offset:
			// these records are the new start, keep them. Only those
			// of a partition the Reader no longer owns go.
			if _, ok := r.owned[tp]; !ok {
				return
			}
		} else if moves != r.moves {
			return // moved by SetOffset while this poll ran
		}
		var pbytes int64
		for _, rec := range p.Records {
			r.buf = append(r.buf, fetched{rec: rec, hwm: p.HighWatermark})
			pbytes += int64(len(rec.Key) + len(rec.Value))
		}
		n += int64(len(p.Records))
		bytes += pbytes
		if m := r.s.rec; m != nil {
			lag := max(p.HighWatermark-p.Records[len(p.Records)-1].Offset-1, 0)
			m.Consumed(p.Topic, p.Partition, len(p.Records), int(pbytes), lag)
		}
	})
	r.mu.Unlock()
	if n > 0 {
		r.stats.fetchSize.observe(n)
		r.stats.fetchBytes.observe(bytes)
	}
	if err := r.pollErrors(ctx, mark, fs.Errors()); err != nil {
		return err
	}
	return r.interrupted(ctx, pctx, mark, nil)
}

// interrupted is what a poll whose own ctx (pctx, of the caller's ctx)
// may have ended returns, err being what it met: nil when SetOffset moved
// the reader (the caller polls again), io.EOF after Close, the refusal
// that interrupted it, or the caller's ctx's error.
func (r *Reader) interrupted(ctx, pctx context.Context, mark int64, err error) error {
	cause := context.Cause(pctx)
	switch {
	case r.closed.Load():
		return io.EOF
	case ctx.Err() != nil:
		return r.ctxError(ctx, mark)
	case cause != nil && cause != context.Canceled:
		return cause // a refusal interrupted the poll
	case cause != nil:
		return nil // SetOffset
	}
	return err
}

// waitBackoff is the wait before checking again whether the log reached
// the offset the reader waits for: kafka-go's read backoff, doubling from
// ReadBackoffMin to ReadBackoffMax.
func (r *Reader) waitBackoff() time.Duration {
	n := min(r.waits.Add(1)-1, 16)
	return min(r.config.ReadBackoffMin<<n, r.config.ReadBackoffMax)
}

// checkGroupProtocol reads, once, whether the cluster has KIP-848's
// consumer protocol when the Reader asked for it: without it the engine
// runs a classic group with its own assignor (not the GroupBalancers, so
// kafka-go members cannot share the group); the Reader says so once and
// Stats reports classic.
func (r *Reader) checkGroupProtocol(ctx context.Context) {
	if !r.group || r.s.groupProtocol != GroupProtocolConsumer || r.protocolChecked.Load() {
		return
	}
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, r.engine())
	if err != nil {
		return // the next poll asks again
	}
	r.protocolChecked.Store(true)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) && k.MaxVersion >= 1 {
			return
		}
	}
	r.classicOnly.Store(true)
	r.s.logger.Warn("azkafka: the cluster lacks KIP-848's consumer group protocol (Kafka 4.0+): the group runs the classic protocol with the engine's own assignor, which kafka-go members cannot join",
		"group", r.config.GroupID, "fix", "upgrade the brokers, or use the classic protocol ("+EnvGroupProtocol+"=classic)")
}

// interrupt ends the poll in flight with err as its cause.
func (r *Reader) interrupt(err error) {
	r.mu.Lock()
	if r.pollCancel != nil {
		r.pollCancel(err)
	}
	r.mu.Unlock()
}

// pollErrors decides what the errors of one poll mean for the caller.
func (r *Reader) pollErrors(ctx context.Context, mark int64, errs []kgo.FetchError) error {
	for _, fe := range errs {
		err := fe.Err
		switch {
		case errors.Is(err, kgo.ErrClientClosed) || r.closed.Load():
			return io.EOF
		case ctx.Err() != nil:
			return r.ctxError(ctx, mark)
		case errors.Is(err, context.Canceled):
			continue // SetOffset interrupted the poll
		}
		var loss *kgo.ErrDataLoss
		if errors.As(err, &loss) {
			r.s.logger.Warn("azkafka: the broker lost data the Reader had read; it resumes where the broker's log now is",
				"topic", fe.Topic, "partition", fe.Partition, "error", err)
			continue
		}
		r.stats.errors.Add(1)
		if fe.Topic != "" {
			err = fmt.Errorf("sdk: %s[%d]: %w", fe.Topic, fe.Partition, err)
		}
		err = kafkaError(err)
		if engineTransient(fe.Err) {
			r.absorb(metrics.OpFetch, err)
			continue
		}
		return err
	}
	return nil
}

// absorb counts, remembers and logs (rate-limited) a transient error the
// Reader waits out.
func (r *Reader) absorb(op metrics.Op, err error) {
	r.counters.retries.Add(1)
	if r.s.rec != nil {
		r.s.rec.Retried(op)
	}
	r.hooks.noteError(fmt.Errorf("%s: %w", opText[op], err))
}

// opText names a Reader operation in errors.
var opText = [...]string{metrics.OpFetch: "fetch", metrics.OpCommit: "commit", metrics.OpListOffsets: "list offsets"}

// ctxError is ctx's error, naming the last error absorbed since mark.
func (r *Reader) ctxError(ctx context.Context, mark int64) error {
	err := newCtxError(ctx, r.hooks.since(mark))
	if errors.Is(err, context.DeadlineExceeded) {
		r.stats.timeouts.Add(1)
	}
	return err
}

// start makes the engine consume the partition (partition mode) from the
// offset set so far, at the first read as kafka-go's reader starts: an
// offset below the log's start starts there, one past its end is waited
// for (or, with OffsetOutOfRangeError, is kafka.OffsetOutOfRange). It
// reports whether the engine consumes the partition.
func (r *Reader) start(ctx context.Context) (bool, error) {
	if r.group {
		return true, nil
	}
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return true, nil
	}
	want, moves := r.offset, r.moves
	r.mu.Unlock()
	off := kgo.NewOffset().AtStart() // kafka.FirstOffset, and kafka-go's below-start
	switch {
	case want == kafka.LastOffset:
		off = kgo.NewOffset().AtEnd()
	case want >= 0:
		first, err := r.listOffset(ctx, -2)
		if err != nil {
			return false, err
		}
		last, err := r.listOffset(ctx, -1)
		if err != nil {
			return false, err
		}
		switch {
		case want > last && r.config.OffsetOutOfRangeError:
			return false, kafkaError(fmt.Errorf("sdk: %s[%d]: offset %d is past the end of the log (%d): %w",
				r.config.Topic, r.config.Partition, want, last, kerr.OffsetOutOfRange))
		case want > last:
			return false, nil
		case want >= first:
			off = kgo.NewOffset().At(want)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moves != moves {
		return false, nil // SetOffset moved it meanwhile: start again
	}
	r.started = true
	r.waits.Store(0)
	r.engine().AddConsumePartitions(map[string]map[int32]kgo.Offset{r.config.Topic: {int32(r.config.Partition): off}})
	return true, nil
}

func (r *Reader) assigned(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	r.rebalances.Add(1)
	r.mu.Lock()
	for t, parts := range ps {
		for _, p := range parts {
			r.owned[topicPartition{t, p}] = struct{}{}
		}
	}
	r.mu.Unlock()
}

// revoked commits the marks of the revoked partitions (CommitInterval > 0)
// and drops what is buffered of them.
func (r *Reader) revoked(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
	if r.config.CommitInterval > 0 {
		cctx, cancel := context.WithTimeout(ctx, r.config.RebalanceTimeout)
		if err := r.commitMarks(cctx, ps); err != nil {
			r.s.logger.Warn("azkafka: committing marked offsets of revoked partitions failed; their next owner reads from the previous commit (duplicates, no loss)",
				"error", err)
		}
		cancel()
	}
	r.drop(ps)
}

// lost drops what is buffered of partitions lost with the membership.
func (r *Reader) lost(_ context.Context, _ *kgo.Client, ps map[string][]int32) { r.drop(ps) }

func (r *Reader) drop(ps map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := map[topicPartition]bool{}
	for t, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{t, p}
			gone[tp] = true
			delete(r.owned, tp)
			if m := r.marks[t]; m != nil {
				delete(m, p)
			}
			if m := r.hooks.metrics; m != nil {
				m.released(t, p)
			}
		}
	}
	kept := r.buf[:r.head]
	for _, f := range r.buf[r.head:] {
		if !gone[topicPartition{f.rec.Topic, f.rec.Partition}] {
			kept = append(kept, f)
		}
	}
	clear(r.buf[len(kept):])
	r.buf = kept
}

// CommitMessages commits msgs like kafka.Reader.CommitMessages: for each
// partition the highest offset + 1. With CommitInterval 0 it waits for the
// commit, retrying transient errors and generation changes (the retry goes
// through the group's next generation) until ctx is done; with
// CommitInterval > 0 it marks the offsets for the next periodic commit.
// As kafka-go's, it commits the partitions of msgs whether or not the
// group gave them to this Reader (the broker takes a member's commit for
// any partition). Offsets of a topic the cluster no longer has are dropped
// with a warning, as no retry can commit them. It returns an error
// without a GroupID, as kafka-go does, and io.ErrClosedPipe after Close
// (kafka-go's blocks until ctx ends).
func (r *Reader) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	if !r.group {
		return errors.New("sdk: CommitMessages: unavailable when GroupID is not set")
	}
	if r.closed.Load() {
		return io.ErrClosedPipe
	}
	if len(msgs) == 0 {
		return nil
	}
	var offsets map[string]map[int32]kgo.EpochOffset
	r.mu.Lock()
	for _, m := range msgs {
		tp := topicPartition{m.Topic, int32(m.Partition)}
		if r.config.CommitInterval > 0 {
			r.markLocked(m.Topic, tp.partition, m.Offset)
			continue
		}
		if offsets == nil {
			offsets = map[string]map[int32]kgo.EpochOffset{}
		}
		ps := offsets[m.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			offsets[m.Topic] = ps
		}
		if cur, ok := ps[tp.partition]; !ok || m.Offset+1 > cur.Offset {
			ps[tp.partition] = kgo.EpochOffset{Epoch: -1, Offset: m.Offset + 1}
		}
	}
	r.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return r.commit(ctx, offsets)
}

// commit commits offsets, retrying what is transient until ctx is done.
func (r *Reader) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	mark := r.hooks.errSeq.Load()
	for attempt := 0; ; attempt++ {
		err := r.commitOnce(ctx, offsets)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return r.ctxError(ctx, mark)
		}
		if r.closed.Load() {
			return err
		}
		if isUnknownTopic(err) {
			// A deleted topic: its offsets cannot be committed, and
			// waiting does not change that (kafka-go's commit by name
			// is taken and its ReadMessage goes on).
			if !r.dropDeleted(offsets, err) {
				return nil
			}
			continue
		}
		if !engineTransient(err) && !isGenerationChange(err) {
			return err
		}
		r.absorb(metrics.OpCommit, err)
		if werr := r.s.retry.Sleep(ctx, attempt); werr != nil {
			return r.ctxError(ctx, mark)
		}
	}
}

func (r *Reader) commitOnce(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	var cerr error
	r.engine().CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = kafkaError(fmt.Errorf("sdk: committing offsets of group %s: %w", r.config.GroupID, err))
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					cerr = &commitError{topic: t.Topic, err: kafkaError(fmt.Errorf("sdk: committing %s[%d] of group %s: %w", t.Topic, p.Partition, r.config.GroupID, err))}
					return
				}
			}
		}
	})
	return cerr
}

// dropDeleted removes from offsets the topics the cluster no longer has,
// err being the commit's error, and logs them once each. It reports
// whether offsets of other topics are left to commit.
func (r *Reader) dropDeleted(offsets map[string]map[int32]kgo.EpochOffset, err error) bool {
	var gone []string
	for t := range offsets {
		var ce *commitError
		if errors.As(err, &ce) && ce.topic != t {
			continue
		}
		gone = append(gone, t)
	}
	for _, t := range gone {
		delete(offsets, t)
		r.s.logger.Warn("azkafka: the cluster no longer has the topic; its offsets are not committed",
			"group", r.config.GroupID, "topic", t, "error", err)
	}
	return len(offsets) > 0
}

// commitMarks commits the marked offsets of the partitions in only (all
// when only is nil) and forgets them.
func (r *Reader) commitMarks(ctx context.Context, only map[string][]int32) error {
	r.mu.Lock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range r.marks {
		for p, o := range ps {
			if only != nil && !containsPartition(only[t], p) {
				continue
			}
			if offsets[t] == nil {
				offsets[t] = map[int32]kgo.EpochOffset{}
			}
			offsets[t][p] = o
			delete(ps, p)
		}
	}
	r.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	err := r.commitOnce(ctx, offsets)
	if err != nil {
		// Keep them for the next try, unless newer marks came meanwhile.
		r.mu.Lock()
		for t, ps := range offsets {
			for p, o := range ps {
				tp := topicPartition{t, p}
				if _, owned := r.owned[tp]; !owned {
					continue
				}
				if r.marks[t] == nil {
					r.marks[t] = map[int32]kgo.EpochOffset{}
				}
				if cur, ok := r.marks[t][p]; !ok || cur.Offset < o.Offset {
					r.marks[t][p] = o
				}
			}
		}
		r.mu.Unlock()
	}
	return err
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// commitLoop commits the marks every CommitInterval until Close, which
// ends a commit in flight (Close commits the marks itself).
func (r *Reader) commitLoop() {
	defer close(r.commitDone)
	t := time.NewTicker(r.config.CommitInterval)
	defer t.Stop()
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.commitStop:
			cancel()
		case <-stop.Done():
		}
	}()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(stop, max(r.config.CommitInterval, 5*time.Second))
			if err := r.commitMarks(ctx, nil); err != nil && stop.Err() == nil {
				r.absorb(metrics.OpCommit, err)
			}
			cancel()
		}
	}
}

// Close ends pending and later FetchMessage and ReadMessage calls with
// io.EOF, commits the marked offsets (CommitInterval > 0), leaves the
// group and closes every connection, like kafka.Reader.Close. It returns
// within ReaderCloseTimeout whatever the cluster's state; on a healthy
// cluster, within milliseconds (nothing waits out MaxWait). A commit or
// leave it could not finish by then is logged at Warn and, for the
// commit, returned; the engine then finishes closing in the background.
func (r *Reader) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		r.interrupt(io.EOF)
		close(r.commitStop)
		<-r.commitDone
		ctx, cancel := context.WithTimeout(context.Background(), ReaderCloseTimeout)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			var cerr error
			if r.group && r.config.CommitInterval > 0 {
				if e := r.commitMarks(ctx, nil); e != nil {
					cerr = fmt.Errorf("sdk: Close: committing marked offsets: %w", e)
				}
			}
			if r.group {
				_ = r.engine().LeaveGroupContext(ctx)
			}
			r.engine().Close()
			done <- cerr
		}()
		select {
		case err = <-done:
		case <-ctx.Done():
			err = fmt.Errorf("sdk: Close: the cluster did not answer within %v: marked offsets may not be committed, and the group learns of the leave when the session times out", ReaderCloseTimeout)
			r.s.logger.Warn("azkafka: Reader.Close returned before the engine closed: the cluster did not answer in time",
				"bound", ReaderCloseTimeout, "group", r.config.GroupID, "cause", r.hooks.since(0))
		}
		r.s.policy.onPeerClose.Store(nil)
		if r.s.rec != nil {
			r.s.rec.Closed()
		}
	})
	return err
}

// Config returns the reader's configuration with the defaults kafka-go's
// NewReader applies (not those of its consumer group: HeartbeatInterval,
// SessionTimeout and the like stay as given, as kafka-go's Config returns
// them), and the SDK's Dialer (client ID and connection policy).
func (r *Reader) Config() kafka.ReaderConfig { return r.shown }

// Lag returns the lag of the last message returned by ReadMessage or
// FetchMessage (the partition's high watermark minus the next offset), or
// -1 with a consumer group, like kafka.Reader.Lag.
func (r *Reader) Lag() int64 {
	if r.group {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lag
}

// Offset returns the offset of the next message the reader hands out
// (kafka.FirstOffset before the first read unless SetOffset moved it), or
// -1 with a consumer group, like kafka.Reader.Offset.
func (r *Reader) Offset() int64 {
	if r.group {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.offset
}

// ReadLag asks the partition's leader for its last offset and returns the
// lag of the reader's offset behind it, like kafka.Reader.ReadLag,
// retrying transient errors until ctx is done.
func (r *Reader) ReadLag(ctx context.Context) (int64, error) {
	if r.group {
		return 0, fmt.Errorf("sdk: ReadLag: %w", errGroupOnly)
	}
	last, err := r.listOffset(ctx, -1)
	if err != nil {
		return 0, err
	}
	off := r.Offset()
	switch off {
	case kafka.LastOffset:
		return 0, nil
	case kafka.FirstOffset:
		first, err := r.listOffset(ctx, -2)
		if err != nil {
			return 0, err
		}
		off = first
	}
	return max(last-off, 0), nil
}

// SetOffset moves the reader to offset (or kafka.FirstOffset,
// kafka.LastOffset), like kafka.Reader.SetOffset: the next message is the
// one at offset. As in kafka-go, an offset below the log's start (any
// other negative one too) reads from the start, and one past the end waits
// for the log to reach it (see OffsetOutOfRangeError). Messages fetched
// but not yet handed out are dropped. It fails with io.ErrClosedPipe after
// Close.
func (r *Reader) SetOffset(offset int64) error {
	if r.group {
		return fmt.Errorf("sdk: SetOffset: %w", errGroupOnly)
	}
	if r.closed.Load() {
		return io.ErrClosedPipe
	}
	// Stop the poll in flight and keep others out while the engine moves
	// (a FetchMessage waiting for its turn may start a poll meanwhile:
	// stop that one too).
	for acquired := false; !acquired; {
		r.interrupt(context.Canceled)
		select {
		case r.pollSem <- struct{}{}:
			acquired = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	defer func() { <-r.pollSem }()
	r.mu.Lock()
	defer r.mu.Unlock()
	tp := topicPartition{r.config.Topic, int32(r.config.Partition)}
	r.moves++
	clear(r.buf)
	r.buf, r.head = r.buf[:0], 0
	r.offset = offset // the lag stays that of the last message, as in kafka-go
	if r.started {
		// The next read starts it again at offset (see start).
		r.engine().RemoveConsumePartitions(map[string][]int32{tp.topic: {tp.partition}})
		r.started = false
	}
	return nil
}

// SetOffsetAt moves the reader to the first offset whose timestamp is at or
// after t (kafka.LastOffset when there is none), like
// kafka.Reader.SetOffsetAt.
func (r *Reader) SetOffsetAt(ctx context.Context, t time.Time) error {
	if r.group {
		return fmt.Errorf("sdk: SetOffsetAt: %w", errGroupOnly)
	}
	if r.closed.Load() {
		return io.ErrClosedPipe
	}
	off, err := r.listOffset(ctx, t.UnixMilli())
	if err != nil {
		return err
	}
	if off < 0 {
		off = kafka.LastOffset
	}
	return r.SetOffset(off)
}

// listOffset asks the partition's leader for the offset at timestamp ts
// (-1: the end, -2: the start), retrying transient errors until ctx is
// done.
func (r *Reader) listOffset(ctx context.Context, ts int64) (int64, error) {
	mark := r.hooks.errSeq.Load()
	for attempt := 0; ; attempt++ {
		off, err := r.listOffsetOnce(ctx, ts)
		if err == nil {
			return off, nil
		}
		if ctx.Err() != nil {
			return 0, r.ctxError(ctx, mark)
		}
		if !engineTransient(err) || r.closed.Load() {
			return 0, err
		}
		r.absorb(metrics.OpListOffsets, err)
		if r.s.retry.Sleep(ctx, attempt) != nil {
			return 0, r.ctxError(ctx, mark)
		}
	}
}

func (r *Reader) listOffsetOnce(ctx context.Context, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if r.config.IsolationLevel == kafka.ReadCommitted {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = r.config.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = int32(r.config.Partition)
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.engine())
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return 0, kafkaError(fmt.Errorf("sdk: listing offsets of %s[%d]: %w", r.config.Topic, p.Partition, err))
		}
		return p.Offset, nil
	}
	return 0, fmt.Errorf("sdk: listing offsets of %s[%d]: the response has no partition", r.config.Topic, r.config.Partition)
}

// Stats returns kafka-go's reader statistics since the previous call, plus
// the SDK's counters (see SDKStats). Fetches, timings and sizes come from
// the engine: FetchSize and FetchBytes summarise what each poll of the
// engine handed over.
func (r *Reader) Stats() ReaderStats {
	c := r.config
	partition := "-1"
	if !r.group {
		partition = fmt.Sprint(c.Partition)
	}
	r.mu.Lock()
	queued := int64(len(r.buf) - r.head)
	offset, lag := r.offset, r.lag
	messages, bytes := r.handed, r.handedBytes
	r.handed, r.handedBytes = 0, 0
	r.mu.Unlock()
	// kafka-go's is the offset of its last fetch: 0 before the first.
	offset = max(offset, 0)
	if r.group {
		offset, lag = -1, -1
	}
	ks := kafka.ReaderStats{
		Dials:         r.hooks.dials.Swap(0),
		Fetches:       r.hooks.fetches.Swap(0),
		Messages:      messages,
		Bytes:         bytes,
		Rebalances:    r.rebalances.Swap(0),
		Timeouts:      r.stats.timeouts.Swap(0),
		Errors:        r.stats.errors.Swap(0) + r.hooks.fetchErrors.Swap(0),
		DialTime:      durationStats(&r.hooks.dialTime),
		ReadTime:      durationStats(&r.hooks.readTime),
		WaitTime:      durationStats(&r.hooks.waitTime),
		FetchSize:     summaryStats(&r.stats.fetchSize),
		FetchBytes:    summaryStats(&r.stats.fetchBytes),
		Offset:        offset,
		Lag:           lag,
		MinBytes:      int64(c.MinBytes),
		MaxBytes:      int64(c.MaxBytes),
		MaxWait:       c.MaxWait,
		QueueLength:   queued,
		QueueCapacity: int64(c.QueueCapacity),
		ClientID:      r.s.clientID,
		Topic:         c.Topic,
		Partition:     partition,
	}
	ks.DeprecatedFetchesWithTypo = ks.Fetches
	sdk := r.counters.snapshot(r.s)
	sdk.FetchFromFollower = r.s.fetchFollower
	if r.group {
		sdk.GroupProtocol = r.s.groupProtocol
		if r.classicOnly.Load() {
			sdk.GroupProtocol = GroupProtocolClassic
		}
	}
	r.hooks.fetchStats(&sdk)
	return ReaderStats{ReaderStats: ks, SDK: sdk}
}

// readerOptions puts the user's Dialer, if any, first in opts as the base
// whose TLS, SASL, timeouts and client ID the SDK keeps.
func readerOptions(d *kafka.Dialer, opts []Option) []Option {
	if d == nil {
		return opts
	}
	return append([]Option{WithBaseDialer(d), withFallbackUserID(d.ClientID)}, opts...)
}
