package sdk

// stats.go holds the SDK's counters reported beside kafka-go's stats
// (SDKStats in WriterStats and ReaderStats).

import (
	"sync/atomic"

	"github.com/segmentio/kafka-go"
)

// SDKStats holds what azkafka adds to kafka-go's statistics.
//
// The convention is kafka-go's: a counter counts the events since the
// previous call to Stats on the same Writer or Reader (a delta), as every
// counter of kafka.WriterStats and kafka.ReaderStats does, and as the
// embedded kafka-go fields of WriterStats and ReaderStats do here too. The
// exceptions are marked cumulative (since the client was created): Conn,
// FetchBytes, FetchBytesInZone and FetchBrokers. Each field's doc says
// which it is; the others (Idempotent, ProducerID, ClientID, ...) are
// current values.
//
// What the engine does not report is not counted: how many messages or
// batches a resend carried, and whether the broker had already stored a
// resent batch it still recognised (Kafka acknowledges such a duplicate like
// a first write). Earlier versions' MessagesResent, BatchesResent and
// DuplicateBatches are gone for that reason; Retries counts the resent
// produce requests, ResentStored the resent batches the broker no longer
// recognised.
type SDKStats struct {
	// Retries (delta) is the number of times a failed operation was tried again:
	// for a Writer, the produce requests whose connection failed before
	// the answer came (closed, reset, timed out), which the engine sends
	// again, and the messages resent after a broker found their batch
	// corrupt; for a Reader, a FetchMessage or CommitMessages retry. A
	// batch a broker refused with a retriable error code (a leader moved)
	// is resent too but not counted: the engine does not report it.
	Retries int64
	// TransientErrors (delta) is the number of transient errors (connection closed,
	// reset or refused; temporary Kafka errors) that azkafka absorbed
	// instead of returning them.
	TransientErrors int64
	// ResentStored (delta) is the number of batches an idempotent Writer resent
	// after losing their answers that the broker had stored but no longer
	// recognised as duplicates: a restarted Kafka broker keeps only each
	// producer's last batch per partition. The Writer asked the partition's
	// leader (DescribeProducers, which needs Read on the topic) how far
	// the producer's sequence got, and counted them delivered instead of
	// letting the engine store them again under a new epoch. Their
	// messages' Offset is -1 in Completion.
	ResentStored int64
	// Idempotent reports whether the Writer produces idempotently (see
	// Writer): false when it is off, or when under auto the cluster
	// refused a producer ID.
	Idempotent bool
	// ProducerID and ProducerEpoch are the idempotent Writer's current
	// producer identity; -1 before the cluster gave one (the first
	// acknowledged batch) or without idempotence.
	ProducerID    int64
	ProducerEpoch int16
	// EpochBumps (delta) counts the changes of the idempotent Writer's producer
	// ID or epoch seen by Stats since its previous call: the engine moves
	// to a new epoch after the broker lost the producer's state or a
	// batch failed with its outcome unknown.
	EpochBumps int64
	// FetchFromFollower reports whether the Reader sends its AZ as the
	// rack ID of its fetches (see WithFetchFromFollower).
	FetchFromFollower bool
	// GroupProtocol is the Reader's consumer group protocol; "" without a
	// GroupID.
	GroupProtocol GroupProtocol
	// FetchBytes (cumulative) is the size of the record batches a Reader fetched, as
	// they crossed the network (compressed; the responses' framing and a
	// partial batch at the end of a response are not counted), cumulative
	// since the Reader was created; FetchBytesInZone the part of it fetched from brokers
	// whose rack is AZ. Their ratio is the share of consumer traffic
	// that stayed in the client's zone.
	FetchBytes       int64
	FetchBytesInZone int64
	// FetchBrokers (cumulative) breaks FetchBytes down by broker, in node
	// ID order.
	FetchBrokers []BrokerFetch
	// Conn (cumulative) holds the connection counters: connections created, dial
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
	retries      atomic.Int64
	transient    atomic.Int64
	resentStored atomic.Int64
}

// snapshot returns the counters since the previous snapshot, resetting
// them, together with the session's identity and connection counters.
func (c *counters) snapshot(s *session) SDKStats {
	return SDKStats{
		Retries:         c.retries.Swap(0),
		TransientErrors: c.transient.Swap(0),
		ResentStored:    c.resentStored.Swap(0),
		Conn:            s.connStats(),
		ClientID:        s.clientID,
		AZ:              s.az,
		AZSource:        s.azSource,
	}
}
