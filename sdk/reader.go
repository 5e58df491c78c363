package sdk

// reader.go holds the Reader: its doc (modes, commits, errors, what each
// kafka.ReaderConfig field becomes), NewReader with kafka-go's defaults
// and the engine's consumer options, Close, Config and Stats. It pairs
// with reader_fetch.go (ReadMessage and FetchMessage), reader_commit.go
// (group mode's commits and rebalances) and reader_partition.go
// (partition mode's position).

import (
	"context"
	"fmt"
	"io"
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
// consumer group reading Topic or GroupTopics (SetOffset and SetOffsetAt
// are then unavailable, as in kafka-go, while Offset, Lag, ReadLag and
// Stats give the group's values where kafka-go's give -1 or an error:
// see Assignment and Health); without,
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
// Beyond kafka-go, for what its Reader never had: Assignment (each owned
// partition's committed offset, position, high watermark, lag and the
// broker it is read from), Health (for a readiness check), Pause, Resume
// and Paused, Seek within a partition the group assigned, and the options
// WithRebalanceCallbacks, WithGroupInstanceID (static membership) and
// CooperativeStickyGroupBalancer. A program that uses none of them sees
// kafka-go's behaviour, but for a group's Lag, Offset, ReadLag and Stats,
// which give values where kafka-go's give -1 or an error.
//
// Commits follow kafka-go: CommitMessages commits each partition's
// highest given offset + 1. With CommitInterval 0 it is synchronous; with
// CommitInterval > 0 it only marks, and the marks are committed every
// interval, before a partition is revoked, and in Close. ReadMessage is
// FetchMessage followed by CommitMessages; with CommitInterval 0,
// concurrent ReadMessage calls commit one at a time, and a message whose
// partition a later message's commit already passed is not committed
// again, so the group's offset never moves back.
//
// Nothing is skipped: the Reader hands out every record of a partition in
// order from where the group's committed offset (or SetOffset) put it, and
// commits only offsets the caller gave back, so the committed offset never
// passes a message the caller was not given. Records of a partition that
// was revoked meanwhile are dropped, not handed out: its next owner starts
// at the committed offset. Offsets that hold no record (compacted away)
// are passed over, as in kafka-go, and so are transaction markers, which
// kafka-go hands out as messages (see Differences from kafka-go): the
// Reader's position (Offset, Lag, ReadLag, Assignment) moves past a
// marker once a read takes it, and ReadMessage commits past it, as
// kafka-go's does once it has handed the marker out, so that a partition
// whose log ends with a marker has no lag. CommitMessages commits what it
// is given (a message's offset + 1), as Kafka's consumer commits the
// offsets it is given: a group's offset there may stay before a marker.
//
// Message.Time is the record's timestamp, in UTC, as kafka-go gives it,
// except on a topic whose message.timestamp.type is LogAppendTime: there
// it is the broker's append time, as Kafka's Java consumer gives it, where
// kafka-go's is the time the producer wrote (see Differences from
// kafka-go).
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
// (and ReadLag, SetOffsetAt, CommitMessages) as soon as every address
// failed so, and refusals or silence after DefaultBootstrapTimeout (a
// *BootstrapError); once the cluster has been
// unreachable for longer than MaxWait, the errors absorbed are logged at
// Warn. Kafka error codes match kafka-go's (errors.Is(err,
// kafka.GroupAuthorizationFailed)). io.EOF is returned only after Close.
//
// A topic deleted and created again is read on, as kafka-go reads it (by
// name): the engine fetches a topic by its ID and refuses the new one's,
// so once a fetch is refused so and the cluster has the topic under
// another ID, the Reader makes the engine forget the topic and consume
// it again, from the same position in partition mode and from the
// group's committed offsets in a group (within about a second of the
// refusal on the classic protocol; up to the next heartbeats' change of
// assignment under KIP-848). A group that rebalanced while the topic was
// gone, so that no member fetched it, may take it up only at a later
// rebalance.
//
// # kafka.ReaderConfig fields
//
// What each field of the kafka.ReaderConfig given to NewReader becomes on
// the engine (kafka-go's default in parentheses):
//
//   - Brokers: the seed brokers.
//   - GroupID, GroupTopics, Topic, Partition: with GroupID, a group member
//     consuming GroupTopics or Topic; without, Partition of Topic
//     (SetOffset and SetOffsetAt only then, as in kafka-go). As kafka-go's,
//     the first read (or ReadLag, SetOffsetAt) asks the cluster for the
//     topics allowing their creation: one with auto.create.topics.enable
//     (Kafka's default) creates a missing topic. A topic deleted later is
//     not created again.
//   - Dialer (kafka.DefaultDialer): ClientID is the user part of the
//     client ID; TLS the handshake in the SDK's dial (ServerName defaults
//     to the broker's host); SASLMechanism any kafka-go mechanism (PLAIN,
//     SCRAM, AWS MSK IAM, yours) adapted to the engine, sasl.WithMetadata
//     carrying host and port; Timeout and Deadline bound each dial and
//     handshake; DialFunc, LocalAddr, KeepAlive, FallbackDelay and Resolver
//     make the dial under the connection policy; TransactionalID is
//     ignored (a Reader produces nothing).
//   - QueueCapacity (100): when set, the most records taken from the
//     engine per poll. Unset, a poll takes all the engine has buffered (at
//     most a fetch response per broker), so that the engine fetches the
//     next responses while these are handed out (taking 100 at a time, it
//     fetched again only once the last 100 were handed out, and
//     ReadMessage was 15% slower). Stats().QueueLength is what is left of
//     the records taken: unlike kafka-go's queue, it can then exceed
//     Stats().QueueCapacity (100).
//   - MinBytes (1), MaxBytes (1 MB), MaxWait (10 s): the fetch's min
//     bytes, max bytes per partition and max wait; a response per broker
//     holds up to max(MaxBytes, DefaultFetchMaxBytes) once the caller
//     reads fast: it got through a poll's records in less than 10 µs a
//     record, or found none buffered after the first. Until then fetches
//     are of 64 KiB: the first message is not held back while megabytes
//     of others are read, and a slower caller (a commit per message) has
//     one small response per broker decoded ahead of it, not megabytes
//     it may never read. Close never waits for MaxWait. A MaxWait below
//     10ms is 10ms, the engine's shortest (kafka-go asks for 0 ms: the
//     broker answers at once, a busy poll of an empty partition).
//   - IsolationLevel (read uncommitted): the fetch isolation level
//     (SetOffsetAt lists offsets with it). The end of a partition (ReadLag,
//     LastOffset) is its high watermark under either, as in kafka-go: under
//     ReadCommitted, a Reader started at the end while a transaction is
//     open does not hand out that transaction's records.
//   - StartOffset (FirstOffset): where a group member starts on a partition
//     with no committed offset.
//   - OffsetOutOfRangeError (false): an offset (SetOffset) below the log's
//     start reads from the start, as in kafka-go; one past its end is
//     waited for until the log reaches it, or with true is
//     kafka.OffsetOutOfRange. A group's committed offset likewise, when its
//     partition is assigned: below the start it reads from the start (with
//     true too, as kafka-go); past the end (a topic recreated, a cluster
//     failed over) it waits for the log to reach it, handing out nothing
//     below it, or with true returns kafka.OffsetOutOfRange until then.
//     While reading, as in kafka-go with either value: records deleted
//     before they were read (retention, DeleteRecords) are passed over to
//     the log's start; a broker answering out of range for an offset its
//     log has is asked again at that offset (never from the log's start,
//     which would hand out again what was read).
//     A poll that returned kafka.OffsetOutOfRange and no messages is
//     followed by a backoff (ReadBackoffMin doubling up to
//     ReadBackoffMax; SetOffset, Seek and Close end it), so that a caller
//     retrying at once does not flood the broker; in a group this also
//     holds back the next messages of the Reader's other partitions by up
//     to that backoff while one is past its end.
//   - CommitInterval (0): 0 makes CommitMessages synchronous; > 0 marks,
//     committed every interval, before a partition is revoked and in Close
//     (within 10 s). Commits go to the group's coordinator on a connection
//     of the Reader's own, written and read by the committing goroutine
//     as kafka-go's commit loop does.
//   - GroupBalancers (range, round-robin): classic protocol, each one with
//     its protocol name and user data (CooperativeStickyGroupBalancer
//     first makes the group cooperative while every member lists it); consumer protocol, ignored but for
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
	// attemptLimit, when not 0, replaces the bootstrap's timeout as the
	// bound of an attempt made before the cluster was reached (retrying).
	attemptLimit time.Duration
	// rangeFirst: the config listed kafka.RangeGroupBalancer first
	// (GroupProtocolConsumer then asks the broker for range).
	rangeFirst bool

	// pollMax is the most records a poll takes from the engine: the
	// config's QueueCapacity when it was set, else 0 (all it buffered).
	pollMax int
	// pollSem admits one poller of the engine at a time.
	pollSem chan struct{}
	// pollGate, while holdPolls waits for pollSem, is closed when it got
	// it: pollers wait for it before they queue for pollSem, so that
	// callers polling in turn cannot keep a Seek out. Guarded by mu.
	pollGate chan struct{}
	holders  int // holdPolls calls waiting for pollSem; guarded by mu

	mu sync.Mutex
	// q holds the records of the last poll not yet handed out.
	q recordQueue
	// moves counts SetOffset calls (partition mode) and Seek calls (both
	// modes): a poll that began before a SetOffset keeps none of its
	// records, one that began before a Seek none of the sought
	// partition's (ctl.sought). In group mode a poll keeps the records of
	// the partitions owned when it returns.
	moves uint64
	owned map[topicPartition]*partState
	// ctl is what Pause and Seek changed; rewindMu orders the engine
	// moves they and poll make.
	ctl      controls
	rewindMu sync.Mutex
	// marks are the offsets CommitMessages marked with CommitInterval >
	// 0, not yet committed; pend is the mark of the run of one
	// partition's messages ReadMessage is handing out, which joins marks
	// when the run ends or before marks is read (marksLocked).
	marks map[string]map[int32]kgo.EpochOffset
	pend  pendingMark
	// unmarked counts the partitions whose marks the group took away
	// before they were committed (lost, or revoked with the commit
	// failing): Close reports it (see dropMarksLocked).
	unmarked int
	// topicIDs are the IDs of the topics fetched, which a commit names
	// them by (OffsetCommit v10+; see commitOnce) and checkRecreated
	// compares with the cluster's.
	topicIDs map[string][16]byte
	// recreateChecked is when checkRecreated last asked the cluster.
	recreateChecked time.Time
	// assigns counts the group's assignments to the Reader (never reset,
	// unlike the rebalances of Stats).
	assigns atomic.Int64
	// commitTurn (of capacity 1, held while a commit is sent) orders the
	// commits sent directly (commitOnce), which go on coord when it is
	// there; a commit waits for its turn until its ctx ends.
	commitTurn chan struct{}
	coord      coordConn
	// readCommits orders the commits of concurrent ReadMessage calls
	// (CommitInterval 0); see readCommit.
	readCommits readCommits
	// handed and handedBytes count the messages handed out (key and
	// value bytes) since the last Stats.
	handed, handedBytes int64
	// pollBytes are the key and value bytes handed out of the last poll
	// while pollOpen; stats.fetchBytes gets them once the poll's records
	// are all handed out or the next poll begins, as kafka-go's gets a
	// fetch's once its messages are queued.
	pollBytes int64
	pollOpen  bool
	// Partition mode: the next offset to hand out (or FirstOffset,
	// LastOffset before the first), its lag, and whether the engine
	// consumes the partition yet.
	offset  int64
	lag     int64
	started bool
	// waits counts the checks while the offset is past the log's end.
	waits atomic.Int64
	// refused is Reader.moves+1 when the last poll returned
	// kafka.OffsetOutOfRange (OffsetOutOfRangeError), else 0: the next
	// poll at the same position waits a backoff first, so that a caller
	// retrying at once does not turn each call into requests.
	refused atomic.Uint64
	// pollCancel interrupts the poll in flight (SetOffset, Close, a
	// refusal).
	pollCancel context.CancelCauseFunc

	// protocolChecked: the cluster's support of GroupProtocolConsumer
	// was read; classicOnly: it has none, and the engine fell back.
	protocolChecked atomic.Bool
	classicOnly     atomic.Bool

	closed    atomic.Bool
	fullFetch atomic.Bool // the fetch limits were raised (raiseFetchLimits)
	// asked: the cluster was asked for the Reader's topics, allowing
	// their creation (askForTopics); asking: the ask runs, counted in
	// askWG (Close waits for it); askEnded, under askMu: Close began
	// waiting, no ask may start.
	asked, asking atomic.Bool
	askMu         sync.Mutex
	askEnded      bool
	askWG         sync.WaitGroup
	// polled is the last poll that returned records; poll's own (polls
	// run one at a time, under pollSem).
	polled     polled
	created    time.Time
	closedAt   atomic.Int64 // unix nanoseconds
	closeDone  atomic.Bool  // Close has returned
	closeOnce  sync.Once
	commitStop chan struct{}
	commitDone chan struct{}
	counters   counters
	stats      readerCounters
	rebalances atomic.Int64
}

// pendingMark is a mark not yet in Reader.marks.
type pendingMark struct {
	st        *partState // nil: none
	topic     string
	partition int32
	next      int64
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
// values from one broker (TestSDKReaderMemory): the Go heap peaked 22–31
// MiB above its start with 1 partition, 82–84 MiB with 100.
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
// invalid config (where kafka.NewReader panics, and for the values
// MustNewReader lists that the engine cannot honour), options or
// environment. A config kafka.NewReader accepts it accepts otherwise, with
// kafka-go's meaning: values of fields kafka-go ignores are ignored
// (without GroupID, a StartOffset neither FirstOffset nor LastOffset), a
// MaxWait below 10ms is 10ms (the engine's shortest fetch wait; kafka-go
// asks for 0 ms, a busy poll), and Config returns the values given.
//
// It may detect the availability zone (once per process) unless WithAZ or
// AZKAFKA_AZ gives it. It does not wait for the cluster: connection errors
// come from the reads.
func NewReader(config kafka.ReaderConfig, opts ...Option) (*Reader, error) {
	if err := kafkaGoReaderPanic(config); err != nil {
		return nil, fmt.Errorf("sdk: NewReader: invalid kafka.ReaderConfig: %w", err)
	}
	if err := engineRefuses(config); err != nil {
		return nil, fmt.Errorf("sdk: NewReader: kafka.ReaderConfig: %w", err)
	}
	given := config
	engineConfig(&config)
	passed := config
	rangeFirst := len(config.GroupBalancers) > 0 && isRange(config.GroupBalancers[0])
	pollMax := config.QueueCapacity // before the default
	var shown kafka.ReaderConfig
	if err := readerDefaults(&config, &shown); err != nil {
		return nil, fmt.Errorf("sdk: NewReader: invalid kafka.ReaderConfig: %w", err)
	}
	showGiven(&shown, passed, given)
	// A broker may exceed fetch.max.bytes by a record batch (KIP-74): the
	// frame guard's limit is at least 1.5 times it.
	fetchMax := readerFetchMax(config)
	s, err := newSession(context.Background(), append([]Option{forCtor(ctorReader), withResponseFloor(fetchMax + fetchMax/2)}, withBaseDialer(config.Dialer, opts)...))
	if err != nil {
		return nil, inCtor("NewReader", err)
	}
	config.GroupBalancers = withZone(config.GroupBalancers, s.az)
	shown.GroupBalancers = config.GroupBalancers
	r := &Reader{
		s:      s,
		config: config,
		shown:  shown,

		group:       config.GroupID != "",
		rangeFirst:  rangeFirst,
		pollMax:     pollMax,
		pollSem:     make(chan struct{}, 1),
		readCommits: readCommits{turn: make(chan struct{}, 1)},
		commitTurn:  make(chan struct{}, 1),
		created:     time.Now(),
		owned:       map[topicPartition]*partState{},
		ctl: controls{pausedTopics: map[string]bool{}, pausedParts: map[topicPartition]bool{},
			rewind: map[topicPartition]int64{}, sought: map[topicPartition]uint64{}},
		marks:      map[string]map[int32]kgo.EpochOffset{},
		topicIDs:   map[string][16]byte{},
		offset:     kafka.FirstOffset,
		commitStop: make(chan struct{}),
		commitDone: make(chan struct{}),
	}
	r.hooks = startClient(s, metrics.Client{Kind: metrics.KindReader, Topic: config.Topic, Group: config.GroupID, FetchFromFollower: s.fetchFromFollower},
		&r.counters, true, config.Brokers)
	r.hooks.warnAfter = config.MaxWait
	if s.fetchFromFollower {
		r.hooks.zone = newZoneFallback(s.az, s.logger)
		r.hooks.zone.rec = s.rec
	}
	onFatal := r.interrupt
	r.hooks.onFatal.Store(&onFatal)
	r.config.Dialer = s.dialer()
	r.shown.Dialer = r.config.Dialer
	// The hooks keep the client (see engine).
	if _, err := kgo.NewClient(r.engineOpts()...); err != nil {
		s.stop()
		return nil, inCtor("NewReader", err)
	}
	s.engineUp(r.hooks)
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
	if c.MaxBytes > 1<<30 {
		return fmt.Errorf("MaxBytes %d is above 1 GiB", c.MaxBytes)
	}
	return nil
}

// askForTopics asks the cluster, in the background, for the Reader's
// topics, allowing it to create those it lacks, as kafka-go's Reader's
// first lookup of its partitions does (a Metadata request of a version
// that always allows it): a cluster with auto.create.topics.enable
// (Kafka's default) creates a missing topic with its default partition
// count, and the engine, which asks without, then reads it. Once it got an
// answer it never asks again; an ask that failed is made again at the next
// read. It ends with the engine (Close).
func (r *Reader) askForTopics() {
	if r.asked.Load() || !r.asking.CompareAndSwap(false, true) {
		return
	}
	r.askMu.Lock()
	if r.askEnded {
		r.askMu.Unlock()
		r.asking.Store(false)
		return
	}
	r.askWG.Add(1)
	r.askMu.Unlock()
	go func() {
		defer r.askWG.Done()
		defer r.asking.Store(false)
		// As the engine's: GroupTopics only with a GroupID (kafka-go
		// ignores them otherwise).
		topics := []string{r.config.Topic}
		if r.group && len(r.config.GroupTopics) > 0 {
			topics = r.config.GroupTopics
		}
		req := metadataRequest(topics...)
		req.AllowAutoTopicCreation = true
		ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
		defer cancel()
		resp, err := req.RequestWith(ctx, r.engine())
		if err != nil {
			return
		}
		r.asked.Store(true)
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 {
				// Created now, or not there: the engine looks again.
				r.engine().ForceMetadataRefresh()
				return
			}
		}
	}()
}

// askTimeout bounds an ask of askForTopics.
const askTimeout = 30 * time.Second

// metadataRequest is a Metadata request for topics by name.
func metadataRequest(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// partitions reads the topics' partitions, leaders and replicas.
func (r *Reader) partitions(ctx context.Context, topics []string) ([]kafka.Partition, error) {
	resp, err := metadataRequest(topics...).RequestWith(ctx, r.engine())
	if err != nil {
		return nil, err
	}
	return partitionsFromMetadata(resp), nil
}

// Close ends pending and later FetchMessage and ReadMessage calls with
// io.EOF, commits the marked offsets (CommitInterval > 0), leaves the
// group and closes every connection, like kafka.Reader.Close. It returns
// within ReaderCloseTimeout whatever the cluster's state; on a healthy
// cluster, within milliseconds (nothing waits out MaxWait). A commit or
// leave it could not finish by then is logged at Warn and, for the
// commit, returned; the engine then finishes closing in the background.
// It also returns an error when offsets marked earlier (CommitInterval >
// 0) were dropped uncommitted because the group took their partitions
// away first (the session expired, or a rebalance's commit failed), each
// logged at Warn when it happened: their messages are read again.
func (r *Reader) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.closedAt.Store(time.Now().UnixNano())
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
				r.leave(ctx)
			}
			r.closeCoordinator()
			r.engine().Close()
			r.askMu.Lock()
			r.askEnded = true
			r.askMu.Unlock()
			r.askWG.Wait() // the engine's Close ends it
			done <- cerr
		}()
		select {
		case err = <-done:
			if err == nil {
				err = r.unmarkedError()
			}
		case <-ctx.Done():
			what := "its connections close in the background"
			switch {
			case r.group && r.config.CommitInterval > 0:
				what = "marked offsets may not be committed, and the group learns of the leave when the session times out"
			case r.group:
				what = "the group learns of the leave when the session times out"
			}
			cause := r.hooks.since(0)
			err = fmt.Errorf("sdk: Close: the cluster (%s) did not answer within %v: %s", strings.Join(r.config.Brokers, ","), ReaderCloseTimeout, what)
			if cause != nil {
				err = fmt.Errorf("%w; last error: %v", err, cause)
			}
			r.s.logger.Warn("azkafka: Reader.Close returned before the engine closed: the cluster did not answer in time",
				"bound", ReaderCloseTimeout, "group", r.config.GroupID, "brokers", r.config.Brokers, "cause", cause)
			r.closeCoordinator()
		}
		r.s.stop()
	})
	r.closeDone.Store(true)
	return err
}

// leave leaves the group as Close does: the engine's LeaveGroup, and for a
// static member of a consumer-protocol group the temporary leave (member
// epoch -2, KIP-848) with its instance ID, which Kafka requires and the
// engine's leave does not carry (Kafka 4.3.1 refuses it: "InstanceId
// can't be null"); without it the member's restart is refused
// (UNRELEASED_INSTANCE_ID) until its session expires.
func (r *Reader) leave(ctx context.Context) {
	memberID, _ := r.engine().GroupMetadata()
	_ = r.engine().LeaveGroupContext(ctx)
	if r.s.instanceID == "" || r.s.groupProtocol != GroupProtocolConsumer || r.classicOnly.Load() || memberID == "" {
		return
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = r.config.GroupID
	req.MemberID = memberID
	req.MemberEpoch = -2
	req.InstanceID = &r.s.instanceID
	resp, err := req.RequestWith(ctx, r.engine())
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		r.s.logger.Warn("azkafka: the static member's leave failed; its restart may wait for its session to expire",
			"group", r.config.GroupID, "instance_id", r.s.instanceID, "error", err)
	}
}

// Config returns the reader's configuration with the defaults kafka-go's
// NewReader applies (not those of its consumer group: HeartbeatInterval,
// SessionTimeout and the like stay as given, as kafka-go's Config returns
// them), and the SDK's Dialer (client ID and connection policy).
func (r *Reader) Config() kafka.ReaderConfig { return r.shown }

// Stats returns kafka-go's reader statistics since the previous call, plus
// the SDK's counters (see SDKStats). Fetches, timings and sizes come from
// the engine: FetchSize summarises the messages each poll of the engine
// handed over, FetchBytes their key and value bytes, counted once the
// poll's messages are all handed out (or the next poll begins), as
// kafka-go's counts each fetch's once its messages are queued. Messages,
// Bytes, Offset and Lag count what FetchMessage and ReadMessage handed
// out, where kafka-go's count what its fetches queued (after two
// FetchMessage calls on a partition of four messages: 2 messages, offset
// 2 and lag 2, against kafka-go's 4, 4 and 0); Timeouts counts the calls
// that ended with their ctx's deadline, not each fetch that waited MaxWait
// in vain; Errors counts failed fetches and the errors polls returned,
// not the fetches the Reader cut short itself (SetOffset, a rebalance,
// Close), which kafka-go counts.
func (r *Reader) Stats() ReaderStats {
	c := r.config
	partition := "-1"
	if !r.group {
		partition = fmt.Sprint(c.Partition)
	}
	r.mu.Lock()
	queued := int64(r.q.len())
	offset, lag := r.offset, r.lag
	messages, bytes := r.handed, r.handedBytes
	r.handed, r.handedBytes = 0, 0
	r.mu.Unlock()
	// kafka-go's is the offset of its last fetch: 0 before the first.
	offset = max(offset, 0)
	if r.group {
		// Before the group's lag is known, kafka-go's gauges: 0.
		offset, lag = 0, 0
		if l := r.Lag(); l >= 0 {
			offset, lag = r.Offset(), l
		}
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
		MinBytes:      int64(r.shown.MinBytes), // as Config gives them
		MaxBytes:      int64(r.shown.MaxBytes),
		MaxWait:       r.shown.MaxWait,
		QueueLength:   queued,
		QueueCapacity: int64(r.shown.QueueCapacity),
		ClientID:      r.s.clientID,
		Topic:         c.Topic,
		Partition:     partition,
	}
	ks.DeprecatedFetchesWithTypo = ks.Fetches
	sdk := r.counters.snapshot(r.s)
	sdk.FetchFromFollower = r.s.fetchFromFollower
	if r.group {
		sdk.GroupProtocol = r.s.groupProtocol
		if r.classicOnly.Load() {
			sdk.GroupProtocol = GroupProtocolClassic
		}
	}
	r.hooks.fetchStats(&sdk)
	return ReaderStats{ReaderStats: ks, SDK: sdk}
}
