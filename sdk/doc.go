// Package sdk makes segmentio/kafka-go clients zone-aware and resilient on
// multi-AZ Kafka-compatible clusters.
//
// It stamps the WarpStream client ID
//
//	[<user id>,]warpstream_session_id=<uuid>,warpstream_az=<az>,warpstream_interzone_lb=true
//
// wraps kafka.Writer and kafka.Reader so that the connection closes caused by
// interzone load balancing are retried instead of surfacing to the caller, and
// dials through a connection policy that limits and jitters reconnects.
//
// The change to an existing program is a constructor per client and the
// types *Writer and *Reader where it names kafka-go's (`azkafka migrate`
// makes both changes in a module):
//
//	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "billing", Topic: "events"})
//	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events", RequiredAcks: kafka.RequireAll})
//
// MustNewReader and MustNewWriter have kafka.NewReader's and a
// &kafka.Writer{...} literal's shape, with no error result, for a var
// block or a field initialiser; they panic with the error instead.
//
// NewReader and NewWriter are what most programs want: the same API, on
// an engine with fetch from the own zone's replica (Reader) and idempotent
// produce (Writer). NewAZAwareDialer and NewTransport serve programs that
// keep kafka-go's own clients (kafka.Conn, kafka.Client, a kafka.Reader or
// kafka.Writer built by hand): they get the client ID and the connection
// policy, nothing more.
//
//	dialer, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 10 * time.Second})
//	transport, err := sdk.NewTransport(nil)
//	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}
//
// # Reader
//
// Reader keeps kafka.Reader's methods and kafka.ReaderConfig and runs on
// franz-go's consumer (kgo): fetch from the replica in the client's zone
// (WithFetchFromFollower), classic groups with the kafka-go balancers or
// KIP-848 (WithGroupProtocol), Close in milliseconds on a healthy cluster
// and within ReaderCloseTimeout on any. See Reader.
//
// # Idempotent produce
//
// Writer keeps kafka.Writer's configuration and methods and runs on
// franz-go's producer (kgo) for every RequiredAcks. With kafka.RequireAll
// it produces idempotently by default (AZKAFKA_IDEMPOTENCE,
// WithIdempotence): a producer ID from the cluster, a sequence per
// partition, up to 5 requests in flight per broker, and a resend is the
// same batch, which the broker stores once. Each partition keeps the
// order messages were handed over in. A synchronous call never waits for
// BatchTimeout, and a message is resent until its delivery budget (110 s
// by default) is spent. See Writer for the exact guarantee and the cases
// that remain.
//
// # Exactly once
//
// Processor (consume-transform-produce) and TxnWriter (transactional
// writes) run on Kafka's transactions (KIP-98, KIP-447; KIP-890's
// transaction.version 2 where the cluster has it). What is exactly once:
// the messages a Processor's transaction writes and the group's offsets of
// the messages it read are committed together or not at all, so a
// read_committed reader (kafka.ReaderConfig.IsolationLevel
// kafka.ReadCommitted) sees the output of each input message once, in the
// input's order per key when the output is partitioned by key, through
// crashes, restarts, rebalances and zombies (an instance that lost its
// partitions while paused is fenced by the group's generation and its
// commit fails). A TxnWriter's writes between Begin and Commit are
// visible together or never. What is not: effects outside Kafka (a
// database write, an HTTP call made while processing) run again when a
// batch is read again after an abort, and read_uncommitted readers (kafka-go's
// default) see aborted data too. The errors say what happened:
// ErrTxnAborted (and ErrTxnRebalanced, ErrTxnTimedOut), ErrTxnFenced,
// ErrTxnCoordinator, ErrTxnUnknown, ErrTxnUnsupported, ErrNoTxn; TxnStats counts
// transactions begun, committed and aborted by cause, and their duration,
// and WithMetrics reports them (metrics.Recorder's TxnBegun and TxnEnded).
//
// # Zone affinity on Apache Kafka and MSK
//
// Where a broker's zone is its broker.rack, WithRackAwarePartitioning
// (AZKAFKA_RACK_AWARE_PARTITIONING) makes the Writer send keyless messages
// to partitions led in the client's AZ, the Reader fetches from the
// replica in its AZ (KIP-392), and ZoneAffinityGroupBalancer gives the
// members of a consumer group the partitions led in their zone (which
// matters where followers cannot serve).
//
// # Client ID
//
// Each client instance (each NewWriter, NewReader, NewAZAwareDialer or
// NewTransport) has one session ID, a random UUID v4 kept across
// reconnects (WithSessionID, AZKAFKA_SESSION_ID fix it). The user's own
// client ID (WithClientID, the base Dialer's or Transport's ClientID, or
// AZKAFKA_CLIENT_ID) stays first; warpstream_* and ws_* pairs already in
// it are replaced, never duplicated. A WarpStream agent splits the ID on
// ',' then '=' without escaping, so values containing either are
// rejected, as are control characters, invalid UTF-8 and IDs longer than
// MaxClientIDLen. ClientID builds an ID and ParseClientID parses one.
//
// Kafka accepts any client ID string (KIP-190 sanitizes it for metrics),
// but client-id quotas match the whole string: with a session ID in it, a
// quota set on the bare user ID no longer applies. Use user-principal
// quotas, or quotas on the exact IDs.
//
// # Configuration
//
// Options (WithAZ, WithClientID, WithMaxConnRate, WithRetry, ...) win over
// the AZKAFKA_* environment variables (the Env* constants), which are all
// read in one place when a client is built. An invalid option or variable
// is an error naming it and quoting the value, for instance
//
//	sdk: AZKAFKA_MAX_CONN_RATE="abc": not a number (connections per second, or off)
//
// and a variable is checked even when an option overrides it; one set to
// blanks is an error too. An AZKAFKA_* variable no package reads is
// logged once per process with the closest known name (CheckEnv). The AZ
// is WithAZ, else AZKAFKA_AZ or WARPSTREAM_AVAILABILITY_ZONE, else
// detected with azdetect (once per process, with azdetect's variables); an
// unknown AZ is not an error: the warpstream_az pair is left out and a
// warning is logged once per process. The command azkafka env lists every
// variable with its value and checks it.
//
// # TLS and SASL
//
// TLS and SASL are kafka-go's: TLS and SASL on the kafka.Transport of a
// Writer (or of NewTransport), TLS and SASLMechanism on the kafka.Dialer of
// a Reader (or of NewAZAwareDialer). Any kafka-go sasl.Mechanism works
// (PLAIN, SCRAM, AWS MSK IAM, your own). The SDK keeps them and runs its
// connection policy and frame guard underneath; the TLS handshake runs in
// its dial function, with ServerName defaulting to the broker's host.
//
// A refusal is never retried as a transient close (see retry.IsTransient):
// a wrong password or an unknown user (SASL_AUTHENTICATION_FAILED), an
// authorizer's refusal, and a broker certificate the client does not trust
// (unknown CA, expired, wrong host) come back from WriteMessages and
// ReadMessage with their cause at once. TLS set against a plaintext port
// (the broker closes the handshake) ends a call at once while the client
// has never reached its cluster (see BootstrapError), and is retried like
// a closed connection after; the error says so, with the address:
//
//	sdk: TLS handshake with 127.0.0.1:9092: the broker closed the connection; is this port a plaintext listener? (then leave TLS unset): EOF
//
// The idempotent Writer needs a producer ID, which Kafka 4.x grants to a
// user allowed to write a topic; a user who may write nothing gets one
// warning and the at-least-once path under the default auto
// (WithIdempotence).
//
// # Connection policy
//
// Each new connection takes a token from a rate limiter shared by every
// client of the process (DefaultMaxConnRate per second, bursts of
// DefaultMaxConnBurst); brokers limit connection creation too (KIP-612),
// and a client that ignores it gets its connections accepted and closed
// unanswered. A re-dial of an address whose last connection failed or
// closed before serving a request waits a full-jitter delay that doubles
// from 50ms up to 1s, reset once a connection to that address served a
// request (for TLS, once the broker answered three times, since the policy
// sees the handshake too); after the peer closes a healthy connection, the
// next dial waits a random 0-50ms so that clients dropped together do not
// return in lock-step. A delay runs from the failure or close, as Kafka's
// own clients count reconnect.backoff.ms from their last attempt: a
// broker that failed minutes ago and was restarted since is dialed at
// once when it leads again. Waits respect the dial's context: a re-dial
// whose delay runs past the dial's deadline fails at once with the last
// dial's error wrapped (syscall.ECONNREFUSED, a *net.OpError: what
// kafka-go's caller would have met), a wait for the limiter's slot past it
// fails at once too. The limit is per process: many processes on one host
// each get their own. The price is
// latency in a storm: the last of N clients dropped at once waits about
// (N - burst) / rate. DialerConnStats and TransportConnStats report the
// counters.
//
// # Errors
//
// Errors the package returns start with "sdk:" (the Writer's and the
// Reader's per-message errors keep kafka-go's forms: kafka.WriteErrors,
// kafka.Error). Callers can match with errors.Is: ErrBadResponse (a
// broker's bytes the frame guard refused), context.DeadlineExceeded and
// context.Canceled (a call's ctx ended: as kafka-go's, the error matches
// nothing else, and its text names the last cause the engine met),
// kafka-go's kafka.Error codes (kafka.TopicAuthorizationFailed, ...) and
// franz-go's kerr errors for the same codes, io.EOF and the other
// connection errors retry.IsTransient reports. With errors.As:
// kafka.WriteErrors (WriteMessages, aligned with its messages),
// kafka.MessageTooLargeError, *BootstrapError (a client that never
// reached its cluster; through it the dial's *net.DNSError, *net.OpError,
// ...) and *tls.CertificateVerificationError. Errors carry their context
// (the topic, partition, address or last cause), so, unlike some of
// kafka-go's, they are not the bare values: compare with errors.Is, not
// == (err == kafka.UnknownTopicOrPartition, err == context.DeadlineExceeded)
// or a type assertion (err.(kafka.Error)), which kafka-go's errors support
// too. Configuration errors (of
// the constructors) are not meant to be matched: they name the option or
// the variable and quote its value, every problem of the configuration
// reported at once, one per line, each under the "sdk: <constructor>:"
// prefix.
//
// # Differences from kafka-go
//
// The differential tests (internal/testkit/difftest) run the same scenarios
// through kafka-go's clients and this package's, in go test ./... on the
// in-process broker and in the conformance suite on Apache Kafka 4.3.1, and
// compare what every call returns (the errors.Is and errors.As targets),
// whether it returns on its own or waits for its ctx, what Completion and
// Stats report and what the cluster stores. They fail on any difference that
// is not one of these, each with its reason:
//
//   - WriteMessages called with a ctx that has already ended returns ctx's
//     error and stores nothing, in async mode too. kafka-go returns ctx's
//     error too (in async mode, nil or ctx's error, at random), but once it
//     has the topic's partitions cached it has queued the messages and
//     stores them: a caller that retries writes them twice.
//   - Writer.Close waits at most kafka.Writer.WriteTimeout for the messages
//     of async calls and of calls still waiting; those it gives up on fail
//     with an error matching context.DeadlineExceeded (Completion gets them
//     with Topic and Partition set). kafka-go's Close waits until every
//     batch is written or has failed MaxAttempts times, each attempt taking
//     up to WriteTimeout: minutes against a broker that does not answer,
//     longer than a pod's grace period.
//   - Reader.CommitMessages after Close returns io.ErrClosedPipe at once.
//     kafka-go's blocks until its ctx ends: the commit can never be made.
//   - With a GroupID and CommitInterval > 0, Reader.Close returns the error
//     of the commit it makes of the marked offsets when the commit fails
//     (and an error when the cluster did not answer within
//     ReaderCloseTimeout, or when marked offsets were dropped uncommitted
//     earlier because the group took their partitions away: the session
//     expired, or a rebalance's commit failed). kafka-go's Close always
//     returns nil and only logs the failed commit to ErrorLogger: a service
//     cannot tell at shutdown that the messages it read since the last
//     commit will be read again by the partition's next owner.
//   - Reader.FetchMessage and ReadMessage called with a ctx that has already
//     ended return ctx's error and hand out nothing, also while messages are
//     queued: the next call gets them. kafka-go's chooses at random between
//     the ended ctx and its queue, so about half such calls hand out a
//     queued message; its ReadMessage then fails that message's commit on
//     the same ctx and returns an empty Message, and the message is not
//     handed out again.
//   - Reader.FetchMessage and ReadMessage after Close return io.EOF at once.
//     kafka-go's hand out what its queue still holds (with a group, messages
//     whose commits fail: the Reader has left), then wait for ctx; io.EOF is
//     what its doc gives for a closed Reader.
//   - Reader.ReadLag after Close returns an error. The Reader's connections
//     are closed; kafka-go's dials the partition's leader again.
//   - With a GroupID, Reader.ReadLag returns the summed lag of the
//     partitions the Reader owns (0 before it owns any), and Lag, Offset and
//     Stats' Lag and Offset give values once they are known (Lag: the sum;
//     Offset: the position when it owns exactly one partition, else -1),
//     where kafka-go's ReadLag returns an error, Lag and Offset -1, and
//     Stats' Lag and Offset those of whichever partition it fetched last (a
//     gauge no caller can attribute). A group member's lag is what a
//     consumer's operators watch (segmentio/kafka-go#508, #862, #1163);
//     Assignment gives it per partition. Before anything is known the values
//     are kafka-go's.
//   - ReadMessage whose commit fails returns the message it fetched together
//     with the error. The caller can still process it (the commit may have
//     been stored); kafka-go returns an empty Message, and the message is
//     not handed out again.
//   - The Reader hands out no transaction markers (the control records that
//     commit or abort a transaction), and with IsolationLevel ReadCommitted
//     no records of aborted transactions; offsets that hold them are passed
//     over: a read that takes a marker moves the position past it (Offset,
//     Lag, ReadLag) and ReadMessage commits past it, as kafka-go's does for
//     the marker it hands out. kafka-go v0.4.51 hands out each marker as a
//     message (a 4-byte key and, on Apache Kafka, a 6-byte value, at the
//     marker's offset) and, under ReadCommitted, the aborted records too:
//     neither is data a producer committed. Kafka's Java consumer and
//     franz-go skip both.
//   - On a topic whose message.timestamp.type is LogAppendTime, Message.Time
//     is the time the broker appended the message. That is the record's
//     timestamp on such a topic, as Kafka's Java consumer gives it; kafka-go
//     v0.4.51 ignores the batch's timestamp type and gives the time the
//     producer wrote.
//   - NewReader and NewWriter return an error for an invalid configuration,
//     naming the field. kafka.NewReader panics, and kafka-go's Writer fails
//     on its first call; an error at construction is what a service can
//     report.
//   - NewReader also returns an error, naming the field and why, for the
//     values its engine cannot honour (the sdk.MustNewReader doc lists
//     them): a SessionTimeout or RebalanceTimeout below 100ms, a
//     HeartbeatInterval above SessionTimeout, a negative CommitInterval with
//     a GroupID, a MaxWait beyond the fetch request's int32 of milliseconds,
//     a MaxBytes above 715827883 (a response may exceed it by half; the
//     engine reads at most 1 GiB). kafka-go's Reader starts with them and
//     then fails on every join (Kafka refuses a session below
//     group.min.session.timeout.ms, 6 s by default), lets its session expire
//     between heartbeats, panics in its commit loop or overflows the
//     request: an error at construction says what is wrong.
//   - Under RequireNone, the messages Completion gets carry the Topic and
//     Partition they were written to, as under the other acks (Offset stays
//     as given: the broker answers none). kafka-go's Completion gets them
//     under RequireNone as the caller gave them (Topic empty when the Writer
//     has it, Partition 0), which tells the callback nothing.
//   - A message that fails before any broker answered for it (its Balancer
//     chose a partition the topic lacks) reaches Completion with the Topic
//     it was written to, as every other message does. kafka-go sets Topic,
//     Partition and Offset from a produce response only, so such a message
//     reaches its Completion as the caller gave it (Topic empty when the
//     Writer has it): the callback cannot tell which topic failed.
//   - NewWriter returns an error for RequiredAcks other than RequireAll
//     (-1), RequireOne (1) and RequireNone (0), naming the value. kafka-go's
//     Writer sends the value, and every message of every call fails with
//     kafka.InvalidRequiredAcks: a Writer that can never write is a
//     configuration error, reported where the configuration is given.
//   - NewWriter returns an error for a Transport that is not a
//     *kafka.Transport (a RoundTripper of the program's own, a wrapper of
//     kafka-go's), naming its type. The SDK's engine talks to the brokers
//     itself: it takes the TLS, SASL, dial, client ID and timeouts from a
//     *kafka.Transport's fields; the requests of a RoundTripper would pass
//     by the client ID, the connection policy and the engine.
//   - NewWriter returns an error for a Compression kafka-go has no codec for
//     (other than 0 to 4: none, Gzip, Snappy, Lz4, Zstd), naming the value.
//     kafka-go's Writer marks its batches with the value and the broker
//     refuses every message (kafka.CorruptMessage; under RequireNone they
//     are dropped without an error): a Writer that can never write is a
//     configuration error, reported where the configuration is given.
//   - With a Compression set, a batch the codec does not make smaller is
//     sent uncompressed (marked so; readers see the same messages): a
//     message within the broker's max.message.bytes uncompressed is stored
//     even where compression would take it over the limit. kafka-go sends
//     every batch compressed, so an incompressible message (already
//     compressed or encrypted data) just under the limit grows past it and
//     is refused with kafka.MessageSizeTooLarge; the engine keeps whichever
//     of the two encodings is smaller.
//   - Once a broker has answered, the Writer resends through closed
//     connections, refusals and leader elections until the delivery budget
//     (110 s by default) or the call's ctx ends, and the Reader refetches
//     until the call's ctx ends: MaxAttempts and WriteBackoffMin/Max do not
//     apply, nor ReadBackoffMin/Max but to the waits for an offset past the
//     log's end (MaxAttempts: 1 too: under RequireOne a message whose
//     response was lost may be stored twice where kafka-go's call fails). A
//     call whose ctx ended meanwhile leaves its messages queued: they are
//     stored once the broker is back. kafka-go gives up after MaxAttempts
//     attempts (seconds), so a broker's restart or an interzone close fails
//     calls; a drop-in exists to ride those out. Before any broker answered,
//     errors no retry fixes end a call at once and refusals or silence after
//     DefaultBootstrapTimeout (10 s from the first dial; from the first
//     failure when a broker had answered a request, such as the handshake,
//     and then went silent), where kafka-go returns the first dial error.
//   - CommitMessages, and ReadMessage's commit, go on through a coordinator
//     that moved, is loading or is unreachable (NOT_COORDINATOR,
//     COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a closed
//     connection) until the commit is made or the call's ctx ends; a commit
//     refused for an ended generation returns once the group has settled,
//     within RebalanceTimeout, and is made again only for the partitions the
//     group gave this member back (see CommitMessages): the refusal
//     otherwise. kafka-go tries three times within about 0.3 s and returns
//     the error: a coordinator's failover, which takes seconds, fails the
//     commit, and the program either stops or leaves its messages to be read
//     again after the next rebalance. A commit it makes once its member has
//     joined again is taken whoever owns the partition now, moving back the
//     offset the new owner committed: its messages are read again.
//   - A group Reader whose GroupTopics names a topic the cluster lacks reads
//     the topics it has, and the missing one once it is created. kafka-go's
//     group leader fails its one metadata lookup for the missing topic and
//     assigns no partition of any topic until the next rebalance: the Reader
//     reads nothing, with no error to its caller.
//   - A refusal of the Reader's group that waiting does not fix
//     (GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID,
//     INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL) is returned by
//     FetchMessage and ReadMessage at once, on each call while it lasts; the
//     Reader joins once it ends. kafka-go's Reader retries the join behind
//     its calls, which wait for their ctx with the cause only in its log: a
//     group its credentials may not join looks like an idle topic.
//   - A WriteMessages refused for its messages' topics (a message naming
//     none, or a topic the cluster lacks) runs the Balancer for none of
//     them: a stateful Balancer (RoundRobin, LeastBytes) places the next
//     calls' messages as if the refused call had not been made. The Writer
//     checks every message's size and topic before it places any, so that a
//     refused call leaves nothing behind; kafka-go's has run the Balancer
//     for the messages before the refused one, which moves a RoundRobin on.
//   - BatchSize does not cap a synchronous call's batches: a call's messages
//     to one partition go in one batch, so a message the broker refuses with
//     its whole batch (a timestamp too far ahead) fails the call's other
//     messages of that partition, and none of them is stored. kafka-go's
//     BatchSize: 1 sends each message in a request of its own; the Writer
//     sends a call in one request per broker, what makes synchronous calls
//     fast, and cuts batches by BatchBytes only.
//   - A synchronous WriteMessages never waits for BatchTimeout, which paces
//     async mode only: its messages are sent at once, or with those of
//     concurrent calls while a request is in flight. kafka-go's call waits
//     until its batch is full (BatchSize, BatchBytes) or BatchTimeout (1 s
//     by default) has passed: a second per call for a service writing one
//     message per request.
//   - A message no broker acknowledged within the Writer's delivery budget
//     (10 × (WriteTimeout + 1 s), 110 s by default) fails with an error
//     matching context.DeadlineExceeded and kgo.ErrRecordTimeout, and the
//     error the engine last met when no broker answered since (a dial's
//     *net.OpError, say). kafka-go's fails after MaxAttempts attempts of
//     WriteTimeout with the last attempt's error, an i/o timeout
//     (*net.OpError) or context.DeadlineExceeded: the Writer resends for
//     longer (rides-through-outages), and its timeout is reported as
//     kafka-go's own deadline errors are.
//   - Completion gets each message's Time as the caller gave it, also on a
//     topic whose broker stamps the append time (message.timestamp.type
//     LogAppendTime): a message without a Time has the zero Time there.
//     kafka-go sets Time from the produce response's append time; franz-go's
//     engine does not pass that time on to the record it reports. The stored
//     record has the broker's time, which a Reader returns.
//   - Writer.Stats counts each message once, at its outcome, in Messages and
//     Bytes, and in Errors, for each call, the partitions where its messages
//     failed: a batch resent after a refusal is not counted again. kafka-go
//     counts every attempt: a resent batch's messages twice and each failed
//     attempt as an error; the engine resends batches without reporting each
//     attempt's messages (SDKStats.Retries counts the resends it can).
//   - Writer.Stats' MaxAttempts, WriteBackoffMin and WriteBackoffMax report
//     the retry policy, which applies in their place; Writes counts produce
//     requests (a request carries a batch per partition); Bytes counts the
//     messages' keys and values; Dials counts the Writer's connections;
//     BatchTime and BatchQueueTime stay zero. The engine resends on the
//     retry policy's backoff within the delivery budget (row
//     rides-through-outages) and sends a request per broker, not per
//     partition; kafka-go's count partition batches and their encoded bytes,
//     and its Writer reports no dials (its Transport dials). The engine does
//     not time batches.
//   - Reader.Stats' Messages, Bytes, Offset and Lag count what FetchMessage
//     and ReadMessage handed out (after two FetchMessage calls on a
//     partition of six messages: 2 messages, offset 2, lag 4). kafka-go's
//     count what its fetches queued, ahead of the caller (6, 6 and 0 there):
//     they tell an operator how far the Reader has fetched, not how far the
//     program has read.
//   - With OffsetOutOfRangeError, a Reader whose offset is past the end of
//     the partition's log (a partition Reader's SetOffset, a group's
//     committed offset) returns kafka.OffsetOutOfRange from its fetches
//     until the log reaches that offset (a poll that returned only that
//     error is followed by a backoff, ReadBackoffMin doubling up to
//     ReadBackoffMax, which in a group also holds back the other partitions'
//     next messages by up to that backoff), then reads from it. kafka-go
//     returns the error once and its reader of that partition then stops for
//     good, fetching nothing until the next SetOffset or, in a group, until
//     the Reader is made again, which the error does not tell the caller.
//
// # Metrics
//
// WithMetrics hands a client's events to a metrics.Provider: dials,
// closes by cause (the peer's: interzone load balancing), re-dials and
// limiter waits, requests and bytes per broker and rack, produced,
// failed and resent batches, producer epochs, consumed messages and lag,
// each partition's fetch source and the zone fallback. Exporters live in
// their own modules: contrib/prometheus and contrib/otel. Without it a
// client pays nothing. WithEngineHooks passes franz-go hooks (kprom) to
// the engine.
//
// # Misbehaving brokers
//
// Every connection a client of this package dials (Writer, Reader, the
// kafka-go clients given NewAZAwareDialer or NewTransport, and
// iq.NewClusterSource with its default Transport or one of NewTransport)
// reads through a frame guard before any decoder: a response whose size prefix is
// negative, shorter than a correlation ID or above the limit
// (WithMaxResponseBytes, AZKAFKA_MAX_RESPONSE_BYTES, DefaultMaxResponseBytes)
// is refused before anything is allocated for it. For kafka-go's own
// clients, whose decoder trusts every count and length, the guard also
// reads each response whole, checks that its correlation ID is the one
// due and decodes it with franz-go's kmsg for its request's API key and
// version before kafka-go sees a byte of it past its checked size prefix
// (a large response's body is read straight into the reader's buffer when
// that holds it all, and checked there); kmsg never takes a count or length
// beyond the bytes at hand, so a response claiming a million topics in 96
// bytes is refused, not allocated. TLS is done in the SDK's dial function
// so that the guard reads plaintext.
//
// A refusal closes the connection. The error matches ErrBadResponse and
// names the address and what was wrong, for instance
//
//	127.0.0.1:9093: not a Kafka broker: its reply begins "HTTP/1.1 400 Bad Request"
//	127.0.0.1:9093: a TLS record on a plaintext connection: the port speaks TLS; set TLS in the Dialer or Transport
//	127.0.0.1:9093: negative response size -16: not a Kafka response
//	127.0.0.1:9093: response of 2147483647 bytes exceeds the 104857600-byte limit (AZKAFKA_MAX_RESPONSE_BYTES)
//	127.0.0.1:9093: malformed Metadata v12 response (96 bytes): a length or count in it runs past its end
//	127.0.0.1:9093: a response with correlation ID 8 where 7 (Produce v9) was due: the connection is out of step
//
// A refused response is not retried as a transient error: the Writer
// fails the messages of that request with it, the Reader returns it from
// FetchMessage once its read attempts are spent. azkafka diagnose reads
// through the same guard.
package sdk
