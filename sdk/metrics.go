package sdk

// metrics.go feeds a metrics.Recorder (WithMetrics): the engine's hooks
// that exist only for it (requests, produced and fetched batches, the
// fetch source of each partition), the error types, and the identity of
// the client the Recorder is for. The SDK's own events are reported where
// they happen: the connection policy (dials, closes, waits), engineHooks
// (errors absorbed), the Writer (resends, failures, producer ID), the
// Reader (messages, lag, retries) and the zone fallback.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/metrics"
)

// WithMetrics makes the client report its events to p: connections and
// their closes, re-dials and limiter waits, requests per broker, produced
// and fetched batches, failures, resends, producer epochs, consumer lag,
// fetch from follower and the zone fallback (see package metrics for
// each event's meaning and unit). Exporters: the modules
// github.com/azkafka/azkafka/contrib/prometheus and .../contrib/otel.
// Writer, Reader, NewAZAwareDialer and NewTransport (connection events
// only) take it. Default: none, at no cost.
func WithMetrics(p metrics.Provider) Option {
	return set("WithMetrics", func(c *config) { c.metrics = p })
}

// WithEngineHooks adds franz-go hooks (kgo.Hook values, such as
// plugin/kprom's Metrics or your own) to the engine of a Writer or
// Reader, as kgo.WithHooks does: they see the engine's connections,
// requests and batches. Records reach them with the Writer's own context
// (not the caller's), so a tracing hook cannot parent its spans on the
// caller's; use contrib/otel's Tracer for that. NewWriter and NewReader
// take it; given to NewAZAwareDialer or NewTransport it is an error.
// Default: none.
func WithEngineHooks(hooks ...kgo.Hook) Option {
	return only("WithEngineHooks", ctorClients, func(c *config) { c.engineHooks = append(c.engineHooks, hooks...) })
}

// startRecorder asks the session's Provider for the Recorder of the client
// c describes (kind and what the constructor knows), and hands it to the
// connection policy. Called by each constructor before anything dials.
func (s *session) startRecorder(c metrics.Client) {
	if s.metrics == nil {
		return
	}
	c.ClientID, c.UserID, c.SessionID = s.clientID, s.userID, s.sessionID
	c.AZ, c.AZSource = s.az, s.azSource
	s.rec = s.metrics.Recorder(c)
	s.policy.rec = s.rec
}

// metricsHooks feed a Recorder: an engine hook of its own for requests,
// registered only when there is a Recorder, so that a client without one
// costs nothing for it; the batches come through the hooks that see them
// already (writerHooks, engineHooks), since the engine gathers every hook
// of a batch event into a slice per produce request. Safe for concurrent
// use.
type metricsHooks struct {
	rec    metrics.Recorder
	az     string
	client *atomic.Pointer[kgo.Client]

	brokers metrics.Cache[int32, brokerEntry]

	// sources is the node each partition's batches came from last
	// (Reader only; nil for a Writer).
	sourcesMu sync.Mutex
	sources   map[topicPartition]int32
}

type brokerEntry struct {
	metrics.Broker
	host string
	port int32
}

var _ kgo.HookBrokerE2E = (*metricsHooks)(nil)

// newMetricsHooks returns the hooks feeding s's Recorder for the engine
// whose client h keeps, or nil without a Recorder.
func newMetricsHooks(s *session, h *engineHooks, reader bool) *metricsHooks {
	if s.rec == nil {
		return nil
	}
	m := &metricsHooks{rec: s.rec, az: s.az, client: &h.client}
	if reader {
		m.sources = map[topicPartition]int32{}
	}
	return m
}

func (m *metricsHooks) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	err := e2e.Err()
	if err != nil && (errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled)) {
		return
	}
	m.rec.Requested(m.broker(meta), key, e2e.BytesWritten, e2e.BytesRead, e2e.DurationE2E(), errorType(err))
}

// produced reports a batch a broker acknowledged (writerHooks).
func (m *metricsHooks) produced(meta kgo.BrokerMetadata, topic string, partition int32, pm kgo.ProduceBatchMetrics) {
	m.rec.Produced(m.broker(meta), topic, partition, pm.NumRecords, pm.UncompressedBytes, pm.CompressedBytes)
}

// fetched reports a batch read from a broker, and a change of the
// partition's fetch source (engineHooks).
func (m *metricsHooks) fetched(meta kgo.BrokerMetadata, topic string, partition int32, fm kgo.FetchBatchMetrics) {
	b := m.broker(meta)
	m.rec.Fetched(b, topic, partition, fm.NumRecords, fm.UncompressedBytes, fm.CompressedBytes)
	if m.sources != nil {
		m.noteSource(b, topic, partition)
	}
}

// noteSource reports the partition's fetch source when it moved to b.
func (m *metricsHooks) noteSource(b metrics.Broker, topic string, partition int32) {
	tp := topicPartition{topic, partition}
	m.sourcesMu.Lock()
	if last, ok := m.sources[tp]; ok && last == b.NodeID {
		m.sourcesMu.Unlock()
		return
	}
	m.sources[tp] = b.NodeID
	m.sourcesMu.Unlock()
	leader := int32(-1)
	if cl := m.client.Load(); cl != nil {
		leader, _, _ = cl.PartitionLeader(topic, partition)
	}
	m.rec.FetchSource(topic, partition, b, leader >= 0 && leader != b.NodeID)
}

// released forgets the partition's fetch source and reports that the
// Reader no longer consumes it.
func (m *metricsHooks) released(topic string, partition int32) {
	m.sourcesMu.Lock()
	delete(m.sources, topicPartition{topic, partition})
	m.sourcesMu.Unlock()
	m.rec.Released(topic, partition)
}

// broker returns meta as a metrics.Broker, built once per broker.
func (m *metricsHooks) broker(meta kgo.BrokerMetadata) metrics.Broker {
	rack := rackOf(meta)
	current := func(b brokerEntry) bool { return b.port == meta.Port && b.host == meta.Host && b.Rack == rack }
	return m.brokers.Get(meta.NodeID, current, func() brokerEntry {
		return brokerEntry{
			Broker: metrics.Broker{NodeID: meta.NodeID, Addr: brokerAddr(meta), Rack: rack, InZone: m.az != "" && rack == m.az},
			host:   meta.Host,
			port:   meta.Port,
		}
	}).Broker
}

func rackOf(meta kgo.BrokerMetadata) string {
	if meta.Rack == nil {
		return ""
	}
	return *meta.Rack
}

// producerIdent is a producer ID and epoch.
type producerIdent struct {
	id    int64
	epoch int16
}

// producerWatch reports the producer ID and epoch of an idempotent
// Writer's batches when they change (seqConn sees every produce request).
type producerWatch struct {
	rec  metrics.Recorder
	last atomic.Pointer[producerIdent]
}

// saw notes the producer ID and epoch of a produce request's batches: a
// new ID, or a higher epoch of the same, is reported.
func (p *producerWatch) saw(id int64, epoch int16) {
	for {
		cur := p.last.Load()
		if cur != nil && cur.id == id && epoch <= cur.epoch {
			return // a request written before the bump
		}
		if p.last.CompareAndSwap(cur, &producerIdent{id, epoch}) {
			p.rec.ProducerID(id, epoch)
			return
		}
	}
}
