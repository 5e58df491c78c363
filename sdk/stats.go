package sdk

import (
	"sync/atomic"

	"github.com/segmentio/kafka-go"
)

// SDKStats holds what azkafka adds to kafka-go's statistics.
//
// Like kafka-go's counters, Retries, MessagesResent and TransientErrors
// count events since the previous call to Stats on the same Writer or
// Reader. Conn is cumulative since the Writer or Reader was created.
type SDKStats struct {
	// Retries is the number of times a failed operation was tried again:
	// a WriteMessages resend round, a FetchMessage or CommitMessages retry.
	Retries int64
	// MessagesResent is the number of messages a Writer sent again because
	// their previous attempt failed with a transient error. Each resend may
	// duplicate the message (see Writer).
	MessagesResent int64
	// TransientErrors is the number of transient errors (connection closed,
	// reset or refused; temporary Kafka errors) that azkafka absorbed
	// instead of returning them.
	TransientErrors int64
	// Idempotent reports whether the Writer's writes take the idempotent
	// path (see Writer): false when it is off, or when under auto the
	// cluster refused a producer ID.
	Idempotent bool
	// ProducerID and ProducerEpoch are the idempotent Writer's current
	// producer identity; -1 before the cluster gave one.
	ProducerID    int64
	ProducerEpoch int16
	// EpochBumps counts the idempotent Writer's moves to a new producer
	// epoch (or ID): after the broker lost the producer's state, or
	// before the next batch of a partition whose last batch had an
	// unknown outcome.
	EpochBumps int64
	// DuplicateBatches counts batches acknowledged on a resend after an
	// attempt whose outcome was unknown (the response was lost), or that
	// the broker answered DUPLICATE_SEQUENCE_NUMBER: without idempotence
	// each could have been stored twice; with it, the broker stored it
	// once. (Kafka acknowledges a duplicate like a first write, so a
	// resend after a lost response is counted whether or not the lost
	// attempt had reached the broker.)
	DuplicateBatches int64
	// BatchesResent counts the idempotent Writer's batch resends.
	BatchesResent int64
	// FetchFromFollower reports whether the Reader sends its AZ as the
	// rack ID of its fetches (see WithFetchFromFollower).
	FetchFromFollower bool
	// GroupProtocol is the Reader's consumer group protocol; "" without a
	// GroupID.
	GroupProtocol GroupProtocol
	// FetchBytes is the size of the record batches a Reader fetched, as
	// they crossed the network (compressed; the responses' framing and a
	// partial batch at the end of a response are not counted), cumulative
	// since the Reader was created; FetchBytesInZone the part of it fetched from brokers
	// whose rack is AZ. Their ratio is the share of consumer traffic
	// that stayed in the client's zone.
	FetchBytes       int64
	FetchBytesInZone int64
	// FetchBrokers breaks FetchBytes down by broker, cumulative, in node
	// ID order.
	FetchBrokers []BrokerFetch
	// Conn holds the connection counters: connections created, dial
	// failures and time spent throttled by the rate limit and re-dial
	// backoff.
	Conn ConnStats
	// ClientID is the Kafka client ID this client sends.
	ClientID string
	// AZ is the availability zone stamped into the client ID; "" when it is
	// unknown and the warpstream_az pair is omitted.
	AZ string
	// AZSource names where AZ came from, for example "option" or "env".
	AZSource string
}

// BrokerFetch is what a Reader fetched from one broker since it was
// created.
type BrokerFetch struct {
	// NodeID is the broker's node ID.
	NodeID int32
	// Addr is the broker's host:port as the cluster advertises it.
	Addr string
	// Rack is the broker's rack (broker.rack); "" when it has none.
	Rack string
	// InZone reports whether Rack is the client's AZ.
	InZone bool
	// Bytes is the size of the record batches fetched from the broker,
	// compressed, as they crossed the network (see FetchBytes).
	Bytes int64
	// Batches is the number of record batches fetched from the broker.
	Batches int64
}

// WriterStats is kafka-go's WriterStats plus the SDK's counters.
type WriterStats struct {
	kafka.WriterStats
	SDK SDKStats
}

// ReaderStats is kafka-go's ReaderStats plus the SDK's counters.
type ReaderStats struct {
	kafka.ReaderStats
	SDK SDKStats
}

// counters are the SDK's per-client event counters. They are atomic so that
// the hot paths never take a lock.
type counters struct {
	retries   atomic.Int64
	resent    atomic.Int64
	transient atomic.Int64
}

// snapshot returns the counters since the previous snapshot, resetting
// them, together with the session's identity and connection counters.
func (c *counters) snapshot(s *session) SDKStats {
	return SDKStats{
		Retries:         c.retries.Swap(0),
		MessagesResent:  c.resent.Swap(0),
		TransientErrors: c.transient.Swap(0),
		Conn:            s.connStats(),
		ClientID:        s.clientID,
		AZ:              s.az,
		AZSource:        s.azSource,
	}
}
