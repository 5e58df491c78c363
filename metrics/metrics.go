// Package metrics is the hook point through which azkafka's clients report
// what they do: sdk.Writer, sdk.Reader, the kafka-go clients given
// sdk.NewAZAwareDialer or sdk.NewTransport, sdk.TxnWriter and
// sdk.Processor, and iq.Client. It has no
// dependencies; exporters implement it in their own modules
// (github.com/azkafka/azkafka/contrib/prometheus and
// github.com/azkafka/azkafka/contrib/otel):
//
//	c := azprom.New() // a Provider and a prometheus.Collector
//	prometheus.MustRegister(c)
//	w, err := sdk.NewWriter(&kafka.Writer{...}, sdk.WithMetrics(c))
//	q, err := iq.NewClient(src, iq.WithMetrics(c))
//
// A Provider gives each client its Recorder once, when the client is built;
// the client then calls the Recorder as things happen. Each method reports
// a delta (one event, or a count since the previous call of the same
// method) unless its doc says it reports a state, which replaces the one
// reported before. Counts and sizes are plain numbers (bytes for sizes),
// durations time.Duration. A client built without a Provider records
// nothing and pays nothing for it: no call, no allocation.
//
// The hot paths call a Recorder per record batch or per request, never per
// message: an idempotent Writer at 100,000 messages a second in batches of
// 100 calls Produced about 1,000 times a second.
//
// Rules for a Recorder: its methods are called concurrently, from the
// engine's and the caller's goroutines, and must neither block nor call
// back into the client. The strings passed (addresses, topics, error
// types) are immutable and may be kept; they come from a bounded set (the
// cluster's brokers, the client's topics, a fixed list of error types), so
// they are safe as label values, except topics and stores where clients
// write to arbitrarily many. Embed Nop so that an implementation keeps
// compiling when methods are added.
package metrics

import "time"

// Provider gives each client its Recorder.
type Provider interface {
	// Recorder returns the Recorder of a new client described by c, or
	// nil for a client that records nothing. Called once per client,
	// from its constructor, before the client connects.
	Recorder(c Client) Recorder
}

// ProviderFunc is a function as a Provider.
type ProviderFunc func(Client) Recorder

// Recorder calls f.
func (f ProviderFunc) Recorder(c Client) Recorder { return f(c) }

// Client describes a client when it is built.
type Client struct {
	Kind Kind
	// ClientID is the Kafka client ID the client sends (user ID, session
	// ID, AZ and interzone pairs; see sdk.ClientID); "" for an iq.Client.
	ClientID string
	// UserID is the application's own client ID, the first segment of
	// ClientID (kafka.Writer's Transport ClientID, sdk.WithClientID,
	// AZKAFKA_CLIENT_ID); "" when none. Unlike ClientID, it stays the same
	// across restarts: the label exporters use.
	UserID string
	// SessionID is the client instance's session ID (a UUID); "" for an
	// iq.Client.
	SessionID string
	// AZ is the client's availability zone; "" when unknown.
	AZ string
	// AZSource names where AZ came from: "option", "env", or the
	// detecting provider ("ec2", "gcp", ...); "" when unknown.
	AZSource string
	// Topic is the Writer's or Reader's topic; "" when the Writer's
	// messages name their own or the Reader reads GroupTopics.
	Topic string
	// Group is the Reader's consumer group ID; "" without one.
	Group string
	// Idempotent reports whether the Writer produces idempotently (see
	// Recorder.ProducerID for when that changes).
	Idempotent bool
	// TransactionalID is the transactional ID of an sdk.TxnWriter's or
	// sdk.Processor's Writer (its transactions: Recorder.TxnBegun and
	// TxnEnded); "" for any other client.
	TransactionalID string
	// FetchFromFollower reports whether the Reader sends its AZ as its
	// fetches' rack ID (KIP-392).
	FetchFromFollower bool
}

// Kind is the kind of client.
type Kind uint8

// Kinds of client.
const (
	KindWriter    Kind = iota + 1 // sdk.Writer
	KindReader                    // sdk.Reader
	KindDialer                    // a kafka.Dialer from sdk.NewAZAwareDialer
	KindTransport                 // a kafka.Transport from sdk.NewTransport
	KindIQ                        // iq.Client
)

var kindNames = [...]string{"", "writer", "reader", "dialer", "transport", "iq"}

// String returns "writer", "reader", "dialer", "transport" or "iq".
func (k Kind) String() string { return name(kindNames[:], int(k)) }

// Broker is a broker of the cluster, as a Writer's or Reader's engine knows
// it.
type Broker struct {
	// NodeID is the broker's node ID; negative for a seed broker the
	// client has not identified yet.
	NodeID int32
	// Addr is the broker's host:port as the cluster advertises it (for a
	// seed broker, as configured).
	Addr string
	// Rack is the broker's rack (broker.rack; a WarpStream agent's AZ);
	// "" when it has none.
	Rack string
	// InZone reports whether Rack is the client's AZ; false when either
	// is unknown.
	InZone bool
}

// Recorder receives one client's events. Each method names the kinds of
// client that call it.
type Recorder interface {
	// Dialed reports a connection attempt to addr (host:port) that
	// reached the network, and whether it connected (ok). Every client
	// that dials. Delta: one attempt (SDKStats.Conn.Dials).
	Dialed(addr string, ok bool)
	// ConnClosed reports the end of a connection to addr that Dialed
	// reported ok, and its cause (ClosePeer: what interzone load
	// balancing does to a client in the wrong zone). Every client that
	// dials; it may follow Closed for a connection still closing. Delta.
	ConnClosed(addr string, cause CloseCause)
	// DialWaited reports how long a dial to addr waited before it reached
	// the network: for the connection-rate limiter or for the re-dial
	// backoff after a failure or a peer's close (each WaitRedial is one
	// re-dial). Every client that dials. Delta; d > 0.
	DialWaited(addr string, reason WaitReason, d time.Duration)

	// Requested reports a request to broker b and its answer: the API key
	// (0 Produce, 1 Fetch, 8 OffsetCommit, 3 Metadata, ...), the bytes
	// written and read (read is 0 when the answer was lost), the time
	// from the start of the write to the end of the read (a Fetch's
	// includes the broker's wait for records, up to MaxWait), and
	// errType: "" for an answered request, else why it was lost (see
	// Absorbed). Requests ended by the client's Close are not reported.
	// Writer and Reader. Delta.
	Requested(b Broker, api int16, written, read int, d time.Duration, errType string)
	// Absorbed reports an error the client waited out instead of
	// returning it (SDKStats.TransientErrors). errType is a Kafka error
	// name ("NOT_LEADER_FOR_PARTITION"), or one of "connection_closed",
	// "connection_refused", "timeout", "bad_response", "tls",
	// "delivery_timeout", "canceled", "client_closed", "_OTHER". Writer and
	// Reader. Delta.
	Absorbed(errType string)

	// Produced reports a record batch broker b acknowledged: its records,
	// their uncompressed bytes (keys, values, headers and record
	// framing) and the batch's bytes as written (compressed). Writer.
	// Delta.
	Produced(b Broker, topic string, partition int32, records, bytes, compressedBytes int)
	// ProduceFailed reports messages that failed for good, with the type
	// of their error (as Absorbed's): what WriteMessages or Completion
	// reports. Writer. Delta.
	ProduceFailed(topic string, partition int32, messages int, errType string)
	// Resent reports a produce request sent again because its connection
	// failed before the answer (ResendConnection; SDKStats.Retries), or a
	// resent batch the broker had already stored and the Writer counted
	// delivered instead of letting it be stored twice (ResendStored;
	// SDKStats.ResentStored). Writer. Delta.
	Resent(cause ResendCause)
	// ProducerID reports the idempotent Writer's producer ID and epoch
	// when its batches first carry them and at each change (an epoch
	// bump: the broker lost the producer's state, or a batch's outcome
	// stayed unknown); -1, -1 when the Writer stopped producing
	// idempotently (the cluster refused a producer ID). Writer. State.
	ProducerID(id int64, epoch int16)

	// Fetched reports a record batch read from broker b: its records
	// (transaction markers included), their uncompressed bytes, and the
	// bytes as they crossed the network (SDKStats.FetchBytes). Reader.
	// Delta.
	Fetched(b Broker, topic string, partition int32, records, bytes, compressedBytes int)
	// Consumed reports the messages of one partition a poll handed to the
	// Reader's buffer, from which FetchMessage and ReadMessage return
	// them in order (a revocation or SetOffset may still drop some):
	// their number and key plus value bytes (deltas), and the lag after
	// the last of them: the partition's high watermark at the fetch minus
	// the next offset (a state, per partition). Reader.
	Consumed(topic string, partition int32, messages, bytes int, lag int64)
	// Released reports that the Reader no longer consumes the partition
	// (revoked or lost in a rebalance): the lag and fetch source reported
	// for it no longer apply. Reader.
	Released(topic string, partition int32)
	// Retried reports an operation the Reader tries again after a
	// transient error (SDKStats.Retries). Reader. Delta.
	Retried(op Op)
	// FetchSource reports the broker a partition's batches come from
	// when it changes; follower reports whether b is not the partition's
	// leader (fetch from follower, KIP-392). Reader. State, per
	// partition.
	FetchSource(topic string, partition int32, b Broker, follower bool)
	// ZoneFallback reports the Reader's zone fallback turning on (a
	// broker of its zone does not answer, so its fetches leave out the
	// rack ID and the leaders serve them; see sdk.ZoneFallbackHold) or
	// off. Reader. State.
	ZoneFallback(on bool)

	// Queried reports one iq.Client.Query of store: its outcome, the copy
	// that answered (for a failure, the last one tried), how many
	// replicas it tried, and how long it took. iq.Client. Delta.
	Queried(store string, outcome QueryOutcome, chosen Copy, attempts int, d time.Duration)

	// TxnBegun reports a transaction begun (TxnWriter.Begin; a
	// Processor's FetchMessages). Writer of an sdk.TxnWriter or
	// sdk.Processor (Client.TransactionalID set). Delta: one transaction.
	TxnBegun()
	// TxnEnded reports the end of a transaction TxnBegun reported:
	// committed, or aborted and why, and its time from the begin to the
	// end (TxnStats). Writer of an sdk.TxnWriter or sdk.Processor. Delta:
	// one transaction.
	TxnEnded(outcome TxnOutcome, d time.Duration)

	// Closed reports that the client was closed: the states it reported
	// no longer apply, and no event follows but ConnClosed. Writer,
	// Reader.
	Closed()
}

// CloseCause says why a connection ended.
type CloseCause uint8

// Causes of a connection's end.
const (
	// CloseLocal: the client closed a connection (idle, or the client
	// closing) that had served a request, or had not been used.
	CloseLocal CloseCause = iota
	// ClosePeer: the peer closed or reset a connection that had served
	// a request: a WarpStream agent moving a client to its own zone, a
	// broker going away. The client reconnects at once.
	ClosePeer
	// ClosePeerEarly: the peer closed the connection before it served a
	// request: a broker limiting connection creation (KIP-612), an agent
	// dying. The next dial to the address backs off longer.
	ClosePeerEarly
	// CloseLocalEarly: the client gave up on the connection before it
	// served a request (a handshake or first request timed out).
	CloseLocalEarly
)

var closeNames = [...]string{"local", "peer", "peer_early", "local_early"}

// String returns "local", "peer", "peer_early" or "local_early".
func (c CloseCause) String() string { return name(closeNames[:], int(c)) }

// WaitReason says why a dial waited.
type WaitReason uint8

// Reasons a dial waits.
const (
	// WaitLimiter: the connection-rate limiter (sdk.WithMaxConnRate).
	WaitLimiter WaitReason = iota
	// WaitRedial: the re-dial backoff of an address whose last
	// connection failed, closed early or was closed by the peer.
	WaitRedial
)

var waitNames = [...]string{"limiter", "redial"}

// String returns "limiter" or "redial".
func (w WaitReason) String() string { return name(waitNames[:], int(w)) }

// ResendCause says why a Writer sent something again.
type ResendCause uint8

// Causes of a resend.
const (
	// ResendConnection: a produce request's connection failed before its
	// answer came; the engine sends its batches again (with idempotence,
	// the same batches, which the broker stores once).
	ResendConnection ResendCause = iota
	// ResendStored: a resent batch that a restarted broker had stored but
	// no longer recognised; the Writer asked the leader and counted it
	// delivered, not stored twice.
	ResendStored
)

var resendNames = [...]string{"connection", "stored"}

// String returns "connection" or "stored".
func (r ResendCause) String() string { return name(resendNames[:], int(r)) }

// Op is a Reader operation that may be retried.
type Op uint8

// Reader operations.
const (
	OpFetch       Op = iota // FetchMessage, ReadMessage
	OpCommit                // CommitMessages and periodic commits
	OpListOffsets           // ReadLag, SetOffsetAt
)

var opNames = [...]string{"fetch", "commit", "list_offsets"}

// String returns "fetch", "commit" or "list_offsets".
func (o Op) String() string { return name(opNames[:], int(o)) }

// QueryOutcome is how an iq.Client.Query ended.
type QueryOutcome uint8

// Query outcomes.
const (
	// QueryOK: a replica answered.
	QueryOK QueryOutcome = iota
	// QueryNoReplica: no replica was eligible (metadata unknown, no
	// active instance, every standby too far behind).
	QueryNoReplica
	// QueryFailed: every replica tried failed, or one failed with an
	// error not worth another.
	QueryFailed
	// QueryCanceled: the caller's ctx ended first.
	QueryCanceled
)

var outcomeNames = [...]string{"ok", "no_replica", "failed", "canceled"}

// String returns "ok", "no_replica", "failed" or "canceled".
func (q QueryOutcome) String() string { return name(outcomeNames[:], int(q)) }

// Copy is which copy of a Kafka Streams store a query reached.
type Copy uint8

// Copies of a store.
const (
	// CopyNone: no replica was tried.
	CopyNone Copy = iota
	// CopyActive: the active instance.
	CopyActive
	// CopyStandbyInZone: a standby in the caller's AZ.
	CopyStandbyInZone
	// CopyStandbyOtherZone: a standby in another AZ, or of unknown AZ.
	CopyStandbyOtherZone
)

var copyNames = [...]string{"none", "active", "standby_in_zone", "standby_other_zone"}

// String returns "none", "active", "standby_in_zone" or
// "standby_other_zone".
func (c Copy) String() string { return name(copyNames[:], int(c)) }

// TxnOutcome is how a transaction ended: committed, or aborted and why.
type TxnOutcome uint8

// Transaction outcomes.
const (
	// TxnCommitted: committed; what it wrote is visible to read_committed
	// readers.
	TxnCommitted TxnOutcome = iota
	// TxnAbort: aborted as asked (Abort; a Processor's function returned
	// an error).
	TxnAbort
	// TxnRebalance: aborted because the group rebalanced (a Processor).
	TxnRebalance
	// TxnTimeout: aborted after the transaction timeout.
	TxnTimeout
	// TxnFenced: another producer with the transactional ID, or a newer
	// generation of the group, fenced this one: a zombie.
	TxnFenced
	// TxnFailed: a write or the commit failed.
	TxnFailed
	// TxnClose: aborted by Close. The last outcome: new ones go before it.
	TxnClose
)

var txnNames = [...]string{"committed", "abort", "rebalance", "timeout", "fenced", "failed", "close"}

// String returns "committed", "abort", "rebalance", "timeout", "fenced",
// "failed" or "close".
func (o TxnOutcome) String() string { return name(txnNames[:], int(o)) }

func name(names []string, i int) string {
	if i < 0 || i >= len(names) {
		return "unknown"
	}
	return names[i]
}

// Nop is a Recorder that records nothing. Embed it in a Recorder to keep
// compiling when methods are added.
type Nop struct{}

var _ Recorder = Nop{}

// Dialed records nothing.
func (Nop) Dialed(string, bool) {}

// ConnClosed records nothing.
func (Nop) ConnClosed(string, CloseCause) {}

// DialWaited records nothing.
func (Nop) DialWaited(string, WaitReason, time.Duration) {}

// Requested records nothing.
func (Nop) Requested(Broker, int16, int, int, time.Duration, string) {}

// Absorbed records nothing.
func (Nop) Absorbed(string) {}

// Produced records nothing.
func (Nop) Produced(Broker, string, int32, int, int, int) {}

// ProduceFailed records nothing.
func (Nop) ProduceFailed(string, int32, int, string) {}

// Resent records nothing.
func (Nop) Resent(ResendCause) {}

// ProducerID records nothing.
func (Nop) ProducerID(int64, int16) {}

// Fetched records nothing.
func (Nop) Fetched(Broker, string, int32, int, int, int) {}

// Consumed records nothing.
func (Nop) Consumed(string, int32, int, int, int64) {}

// Released records nothing.
func (Nop) Released(string, int32) {}

// Retried records nothing.
func (Nop) Retried(Op) {}

// FetchSource records nothing.
func (Nop) FetchSource(string, int32, Broker, bool) {}

// ZoneFallback records nothing.
func (Nop) ZoneFallback(bool) {}

// Queried records nothing.
func (Nop) Queried(string, QueryOutcome, Copy, int, time.Duration) {}

// TxnBegun records nothing.
func (Nop) TxnBegun() {}

// TxnEnded records nothing.
func (Nop) TxnEnded(TxnOutcome, time.Duration) {}

// Closed records nothing.
func (Nop) Closed() {}
