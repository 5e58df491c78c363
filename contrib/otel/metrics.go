// Package azotel exports the metrics of azkafka's clients (sdk.Writer,
// sdk.Reader, the kafka-go Dialers and Transports of sdk.NewAZAwareDialer
// and sdk.NewTransport, sdk.TxnWriter and sdk.Processor, iq.Client) to
// OpenTelemetry, and traces produce
// and consume with the span context carried in the messages' headers (W3C
// trace context). Its import path is
// github.com/azkafka/azkafka/contrib/otel, a module of its own, so that
// azkafka's core needs no OpenTelemetry dependency.
//
//	m, err := azotel.NewMetrics() // the global MeterProvider, or WithMeterProvider
//	w, err := sdk.NewWriter(&kafka.Writer{...}, sdk.WithMetrics(m))
//	r, err := sdk.NewReader(kafka.ReaderConfig{...}, sdk.WithMetrics(m))
//
// Metrics follow OpenTelemetry's messaging semantic conventions (v1.43.0)
// where they have one: messaging.client.sent.messages,
// messaging.client.consumed.messages and messaging.client.operation.duration
// (Produce as send, Fetch as poll, OffsetCommit as commit), with
// messaging.system "kafka", messaging.operation.name and .type,
// messaging.consumer.group.name, error.type, server.address and
// server.port; messaging.destination.name (the topic) only with
// WithTopicAttributes. What only azkafka knows is under azkafka.*: the
// bytes to and from each broker and rack and whether it is in the
// client's zone, connections, their closes by cause, re-dials and waits,
// resends by cause, epoch bumps, lag, fetch from follower, the zone
// fallback, transactions by outcome and their durations, and iq's
// queries. The README's Metrics section lists them.
// Attributes are bounded like contrib/prometheus' labels; no partition,
// no message-derived value.
//
// Tracer traces produce and consume; see its doc.
package azotel

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"

	"github.com/azkafka/azkafka/metrics"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/azkafka/azkafka/contrib/otel"

// Attribute keys of azkafka's own.
const (
	AttrAZ          = attribute.Key("azkafka.az")                  // the client's availability zone
	AttrRack        = attribute.Key("azkafka.broker.rack")         // the broker's rack
	AttrInZone      = attribute.Key("azkafka.broker.in_zone")      // "true", "false", "unknown"
	AttrResult      = attribute.Key("azkafka.dial.result")         // "ok", "error"
	AttrCloseCause  = attribute.Key("azkafka.close.cause")         // metrics.CloseCause
	AttrWaitReason  = attribute.Key("azkafka.wait.reason")         // metrics.WaitReason
	AttrResendCause = attribute.Key("azkafka.resend.cause")        // metrics.ResendCause
	AttrOp          = attribute.Key("azkafka.reader.op")           // metrics.Op
	AttrAPI         = attribute.Key("azkafka.kafka.api")           // a Kafka API key
	AttrOutcome     = attribute.Key("azkafka.iq.outcome")          // metrics.QueryOutcome
	AttrCopy        = attribute.Key("azkafka.iq.copy")             // metrics.Copy
	AttrStore       = attribute.Key("azkafka.iq.store")            // a Kafka Streams store
	AttrTxnOutcome  = attribute.Key("azkafka.transaction.outcome") // metrics.TxnOutcome
)

// MetricsOption configures Metrics.
type MetricsOption func(*metricsConfig)

type metricsConfig struct {
	provider metric.MeterProvider
	topics   bool
}

// WithMeterProvider sets the MeterProvider. Default: otel.GetMeterProvider().
func WithMeterProvider(p metric.MeterProvider) MetricsOption {
	return func(c *metricsConfig) { c.provider = p }
}

// WithTopicAttributes adds messaging.destination.name (the topic) to the
// message counters, the Writer's and Reader's bytes and lag, and
// azkafka.iq.store to iq's queries. Use it when the clients write to and
// read from a bounded set of topics. Default: off.
func WithTopicAttributes() MetricsOption { return func(c *metricsConfig) { c.topics = true } }

// Metrics is the metrics.Provider to hand to the clients (sdk.WithMetrics,
// iq.WithMetrics); one serves every client of a process. Create it with
// NewMetrics. What the clients count per batch, request or poll (messages,
// bytes, lag) is an atomic add, observed when the MeterProvider's reader
// collects; the operation durations and the rarer events are measured as
// they happen. Safe for concurrent use.
type Metrics struct {
	topics bool

	// What the clients count per batch, request or poll is kept in atomic
	// series and observed at collection (an OpenTelemetry measurement
	// costs far more than an atomic add).
	sent, consumed, networkIO, writerBytes, writerBatches, readerBytes, fetchBytes              metric.Int64ObservableCounter
	lag                                                                                         metric.Int64ObservableUpDownCounter
	sentS, consumedS, networkIOS, writerBytesS, writerBatchesS, readerBytesS, fetchBytesS, lagS *seriesSet

	opDuration metric.Float64Histogram

	dials, closes, redials  metric.Int64Counter
	open                    metric.Int64UpDownCounter
	dialWait                metric.Float64Counter
	requestErrors, absorbed metric.Int64Counter

	resends, epochBumps metric.Int64Counter
	idempotent          metric.Int64UpDownCounter

	retries             metric.Int64Counter
	followers, fallback metric.Int64UpDownCounter

	queries, attempts metric.Int64Counter
	queryDuration     metric.Float64Histogram

	txnBegun, txns metric.Int64Counter
	txnDuration    metric.Float64Histogram
}

var _ metrics.Provider = (*Metrics)(nil)

// durationBuckets are the semantic conventions' advice for
// messaging.client.operation.duration, in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// NewMetrics creates the instruments on a meter of the MeterProvider; it
// fails only when the provider refuses an instrument.
func NewMetrics(opts ...MetricsOption) (*Metrics, error) {
	cfg := metricsConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.provider == nil {
		cfg.provider = otel.GetMeterProvider()
	}
	mt := cfg.provider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	m := &Metrics{topics: cfg.topics}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := mt.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := mt.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	observed := func(name, unit, desc string) (metric.Int64ObservableCounter, *seriesSet) {
		c, err := mt.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c, &seriesSet{}
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := mt.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	sent, consumed, dur := messagingconv.ClientSentMessages{}, messagingconv.ClientConsumedMessages{}, messagingconv.ClientOperationDuration{}
	m.sent, m.sentS = observed(sent.Name(), sent.Unit(), sent.Description())
	m.consumed, m.consumedS = observed(consumed.Name(), consumed.Unit(), consumed.Description())
	m.opDuration = histogram(dur.Name(), dur.Description())

	m.dials = counter("azkafka.connection.dials", "{dial}", "Connection attempts that reached the network, by result.")
	m.open = upDown("azkafka.connection.open", "{connection}", "Connections open now.")
	m.closes = counter("azkafka.connection.closes", "{connection}", "Connections ended, by cause (peer: the peer closed one that served, as interzone load balancing does; peer_early: before it served; local, local_early).")
	m.redials = counter("azkafka.connection.redials", "{dial}", "Dials that waited the re-dial backoff after a failure or a peer's close.")
	wait, err := mt.Float64Counter("azkafka.connection.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time dials waited before reaching the network, by reason (limiter, redial)."))
	errs = append(errs, err)
	m.dialWait = wait
	m.networkIO, m.networkIOS = observed("azkafka.network.io", "By", "Bytes written to and read from each broker, by direction, rack and whether the broker is in the client's zone.")
	m.requestErrors = counter("azkafka.request.errors", "{request}", "Requests whose response was lost, by Kafka API and error type.")
	m.absorbed = counter("azkafka.errors.absorbed", "{error}", "Errors the client waited out instead of returning, by type.")

	m.writerBytes, m.writerBytesS = observed("azkafka.writer.bytes", "By", "Uncompressed bytes of the records the brokers acknowledged.")
	m.writerBatches, m.writerBatchesS = observed("azkafka.writer.batches", "{batch}", "Record batches the brokers acknowledged.")
	m.resends = counter("azkafka.writer.resends", "{request}", "Produce requests sent again after their connection failed (connection), resent batches a restarted broker had stored and the Writer counted delivered (stored).")
	m.epochBumps = counter("azkafka.writer.epoch_bumps", "{bump}", "Changes of an idempotent Writer's producer ID or epoch after its first.")
	m.idempotent = upDown("azkafka.writer.idempotent", "{writer}", "Writers producing idempotently now.")

	m.readerBytes, m.readerBytesS = observed("azkafka.reader.bytes", "By", "Key and value bytes of the messages Readers took to hand out.")
	m.fetchBytes, m.fetchBytesS = observed("azkafka.reader.fetch.bytes", "By", "Bytes of record batches fetched from each broker, as they crossed the network.")
	m.retries = counter("azkafka.reader.retries", "{retry}", "Reader operations tried again after a transient error, by op.")
	lag, err := mt.Int64ObservableUpDownCounter("azkafka.reader.lag", metric.WithUnit("{message}"),
		metric.WithDescription("Messages behind the high watermark, summed over the partitions the Readers consume, as of each partition's last fetch."))
	errs = append(errs, err)
	m.lag, m.lagS = lag, &seriesSet{}
	m.followers = upDown("azkafka.reader.follower_partitions", "{partition}", "Partitions fetched from a follower now (KIP-392).")
	m.fallback = upDown("azkafka.reader.zone_fallback", "{reader}", "Readers fetching from the leaders now because a broker of their zone does not answer.")

	m.queries = counter("azkafka.iq.queries", "{query}", "Interactive queries by outcome and the copy that answered or was tried last.")
	m.attempts = counter("azkafka.iq.query.attempts", "{attempt}", "Replicas interactive queries tried.")
	m.queryDuration = histogram("azkafka.iq.query.duration", "Duration of interactive queries, failover included.")

	m.txnBegun = counter("azkafka.transaction.begun", "{transaction}", "Transactions a TxnWriter or Processor began.")
	m.txns = counter("azkafka.transactions", "{transaction}", "Transactions ended, by outcome (committed; aborted by abort, rebalance, timeout, fenced, failed, close).")
	m.txnDuration = histogram("azkafka.transaction.duration", "Time from a transaction's begin to its end, committed or aborted.")
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if _, err := mt.RegisterCallback(m.observe, m.sent, m.consumed, m.networkIO, m.writerBytes, m.writerBatches, m.readerBytes, m.fetchBytes, m.lag); err != nil {
		return nil, err
	}
	return m, nil
}

// observe reports every series of the observed instruments.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	for _, x := range []struct {
		inst metric.Int64Observable
		set  *seriesSet
	}{
		{m.sent, m.sentS}, {m.consumed, m.consumedS}, {m.networkIO, m.networkIOS}, {m.writerBytes, m.writerBytesS},
		{m.writerBatches, m.writerBatchesS}, {m.readerBytes, m.readerBytesS}, {m.fetchBytes, m.fetchBytesS}, {m.lag, m.lagS},
	} {
		for _, s := range x.set.all() {
			o.ObserveInt64(x.inst, s.n.Load(), metric.WithAttributeSet(s.attrs))
		}
	}
	return nil
}

// series is a count kept for one set of attributes, shared by the
// clients that have those attributes.
type series struct {
	attrs attribute.Set
	n     atomic.Int64
}

// seriesSet is an instrument's series, by attribute set; they live as long
// as the Metrics, bounded by the attributes' cardinality.
type seriesSet struct {
	mu   sync.Mutex
	byID map[attribute.Distinct]*series
	list atomic.Pointer[[]*series] // copied on write, for observe
}

// get returns the series of kvs, created on first use.
func (ss *seriesSet) get(kvs ...attribute.KeyValue) *series {
	set := attribute.NewSet(kvs...)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.byID[set.Equivalent()]; ok {
		return s
	}
	if ss.byID == nil {
		ss.byID = map[attribute.Distinct]*series{}
	}
	s := &series{attrs: set}
	ss.byID[set.Equivalent()] = s
	var list []*series
	if l := ss.list.Load(); l != nil {
		list = append(list, *l...)
	}
	list = append(list, s)
	ss.list.Store(&list)
	return s
}

func (ss *seriesSet) all() []*series {
	if l := ss.list.Load(); l != nil {
		return *l
	}
	return nil
}

// Recorder implements metrics.Provider: the clients call it, once each.
func (m *Metrics) Recorder(c metrics.Client) metrics.Recorder { return newRecorder(m, c) }

// recorder is one client's metrics.Recorder: attribute sets built once,
// and the state behind its up-down counters.
type recorder struct {
	metrics.Nop // events added to metrics later
	m           *Metrics
	kind        metrics.Kind
	az          string
	base        []attribute.KeyValue // every instrument's

	dialWaitLimiter, dialWaitRedial []metric.AddOption
	client                          []metric.AddOption // base only

	brokers metrics.Cache[int32, *brokerAttrs]
	addrsMu sync.Mutex
	addrs   map[string]*addrAttrs

	noTopic *topicAttrs
	topics  metrics.Cache[string, *topicAttrs]

	mu         sync.Mutex // the up-down counters' state below
	lags       map[partition]lagEntry
	followers  map[partition]bool
	fallback   bool
	idempotent bool
	sawID      bool
	closed     bool
}

type partition struct {
	topic string
	id    int32
}

type lagEntry struct {
	lag   int64
	attrs *topicAttrs
}

type brokerAttrs struct {
	addr, rack string
	tx, rx     *series // azkafka.network.io
	fetch      *series // azkafka.reader.fetch.bytes; nil but for a Reader
	server     []attribute.KeyValue
	// messaging.client.operation.duration of Produce, Fetch, OffsetCommit
	send, poll, commit []metric.RecordOption
}

type addrAttrs struct {
	ok, failed, redial []metric.AddOption
	open               []metric.AddOption
	closes             [4][]metric.AddOption
}

type topicAttrs struct {
	sent, consumed, bytes, batches, lag *series
}

func addOpts(kvs ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

func recordOpts(kvs ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

// with returns the base attributes and kvs, in a new slice.
func (r *recorder) with(kvs ...attribute.KeyValue) []attribute.KeyValue {
	return append(append(make([]attribute.KeyValue, 0, len(r.base)+len(kvs)), r.base...), kvs...)
}

func newRecorder(m *Metrics, c metrics.Client) *recorder {
	r := &recorder{m: m, kind: c.Kind, az: c.AZ, addrs: map[string]*addrAttrs{}, lags: map[partition]lagEntry{}}
	if c.Kind != metrics.KindIQ {
		r.base = append(r.base, semconv.MessagingSystemKafka)
	}
	if c.UserID != "" {
		r.base = append(r.base, semconv.MessagingClientID(c.UserID))
	}
	if c.AZ != "" {
		r.base = append(r.base, AttrAZ.String(c.AZ))
	}
	if c.Group != "" {
		r.base = append(r.base, semconv.MessagingConsumerGroupName(c.Group))
	}
	r.client = addOpts(r.base...)
	r.dialWaitLimiter = addOpts(r.with(AttrWaitReason.String(metrics.WaitLimiter.String()))...)
	r.dialWaitRedial = addOpts(r.with(AttrWaitReason.String(metrics.WaitRedial.String()))...)
	if !m.topics {
		r.noTopic = r.newTopicAttrs("")
	}
	switch c.Kind {
	case metrics.KindReader:
		r.followers = map[partition]bool{}
	case metrics.KindWriter:
		if c.Idempotent {
			r.idempotent = true
			m.idempotent.Add(context.Background(), 1, r.client...)
		}
	}
	return r
}

func (r *recorder) newTopicAttrs(topic string) *topicAttrs {
	var t []attribute.KeyValue
	if r.m.topics {
		t = append(t, semconv.MessagingDestinationName(topic))
	}
	a := &topicAttrs{}
	switch r.kind {
	case metrics.KindWriter:
		a.sent = r.m.sentS.get(r.with(append(t, semconv.MessagingOperationName("send"))...)...)
		a.bytes = r.m.writerBytesS.get(r.with(t...)...)
		a.batches = r.m.writerBatchesS.get(r.with(t...)...)
	case metrics.KindReader:
		a.consumed = r.m.consumedS.get(r.with(append(t, semconv.MessagingOperationName("poll"))...)...)
		a.bytes = r.m.readerBytesS.get(r.with(t...)...)
		a.lag = r.m.lagS.get(r.with(t...)...)
	}
	return a
}

func (r *recorder) topic(topic string) *topicAttrs {
	if r.noTopic != nil {
		return r.noTopic
	}
	return r.topics.Get(topic, nil, func() *topicAttrs { return r.newTopicAttrs(topic) })
}

// server returns server.address and server.port of addr (host:port).
func server(addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(addr)}
	}
	p, _ := strconv.Atoi(port)
	return []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(p)}
}

func (r *recorder) broker(b metrics.Broker) *brokerAttrs {
	current := func(a *brokerAttrs) bool { return a.addr == b.Addr && a.rack == b.Rack }
	return r.brokers.Get(b.NodeID, current, func() *brokerAttrs {
		inZone := strconv.FormatBool(b.InZone)
		if r.az == "" || b.Rack == "" {
			inZone = "unknown"
		}
		srv := server(b.Addr)
		zone := append(append([]attribute.KeyValue{}, srv...), AttrRack.String(b.Rack), AttrInZone.String(inZone))
		op := func(name string, typ attribute.KeyValue) []metric.RecordOption {
			return recordOpts(r.with(append(append([]attribute.KeyValue{}, srv...), semconv.MessagingOperationName(name), typ)...)...)
		}
		a := &brokerAttrs{
			addr:   b.Addr,
			rack:   b.Rack,
			tx:     r.m.networkIOS.get(r.with(append(zone, semconv.NetworkIODirectionTransmit)...)...),
			rx:     r.m.networkIOS.get(r.with(append(zone, semconv.NetworkIODirectionReceive)...)...),
			server: srv,
			send:   op("send", semconv.MessagingOperationTypeSend),
			poll:   op("poll", semconv.MessagingOperationTypeReceive),
			commit: op("commit", semconv.MessagingOperationTypeSettle),
		}
		if r.kind == metrics.KindReader {
			a.fetch = r.m.fetchBytesS.get(r.with(zone...)...)
		}
		return a
	})
}

func (r *recorder) addr(addr string) *addrAttrs {
	r.addrsMu.Lock()
	defer r.addrsMu.Unlock()
	a := r.addrs[addr]
	if a == nil {
		srv := server(addr)
		kv := func(extra ...attribute.KeyValue) []metric.AddOption {
			return addOpts(r.with(append(append([]attribute.KeyValue{}, srv...), extra...)...)...)
		}
		a = &addrAttrs{
			ok:     kv(AttrResult.String("ok")),
			failed: kv(AttrResult.String("error")),
			redial: kv(),
			open:   kv(),
		}
		for i := range a.closes {
			a.closes[i] = kv(AttrCloseCause.String(metrics.CloseCause(i).String()))
		}
		r.addrs[addr] = a
	}
	return a
}

var bg = context.Background()

func (r *recorder) Dialed(addr string, ok bool) {
	a := r.addr(addr)
	if ok {
		r.m.dials.Add(bg, 1, a.ok...)
		r.m.open.Add(bg, 1, a.open...)
	} else {
		r.m.dials.Add(bg, 1, a.failed...)
	}
}

func (r *recorder) ConnClosed(addr string, cause metrics.CloseCause) {
	a := r.addr(addr)
	r.m.open.Add(bg, -1, a.open...)
	if int(cause) < len(a.closes) {
		r.m.closes.Add(bg, 1, a.closes[cause]...)
	}
}

func (r *recorder) DialWaited(addr string, reason metrics.WaitReason, d time.Duration) {
	switch reason {
	case metrics.WaitLimiter:
		r.m.dialWait.Add(bg, d.Seconds(), r.dialWaitLimiter...)
	case metrics.WaitRedial:
		r.m.dialWait.Add(bg, d.Seconds(), r.dialWaitRedial...)
		r.m.redials.Add(bg, 1, r.addr(addr).redial...)
	}
}

// Kafka API keys with a messaging operation.
const (
	apiProduce      = 0
	apiFetch        = 1
	apiOffsetCommit = 8
)

func (r *recorder) Requested(b metrics.Broker, api int16, written, read int, d time.Duration, errType string) {
	a := r.broker(b)
	a.tx.n.Add(int64(written))
	a.rx.n.Add(int64(read))
	var op []metric.RecordOption
	switch api {
	case apiProduce:
		op = a.send
	case apiFetch:
		op = a.poll
	case apiOffsetCommit:
		op = a.commit
	}
	if errType == "" {
		if op != nil {
			r.m.opDuration.Record(bg, d.Seconds(), op...)
		}
		return
	}
	errAttr := semconv.ErrorTypeKey.String(errType)
	if op != nil {
		name := map[int16]string{apiProduce: "send", apiFetch: "poll", apiOffsetCommit: "commit"}[api]
		r.m.opDuration.Record(bg, d.Seconds(), recordOpts(r.with(append(append([]attribute.KeyValue{}, a.server...), semconv.MessagingOperationName(name), errAttr)...)...)...)
	}
	r.m.requestErrors.Add(bg, 1, addOpts(r.with(append(append([]attribute.KeyValue{}, a.server...), AttrAPI.Int(int(api)), errAttr)...)...)...)
}

func (r *recorder) Absorbed(errType string) {
	r.m.absorbed.Add(bg, 1, addOpts(r.with(semconv.ErrorTypeKey.String(errType))...)...)
}

func (r *recorder) Produced(_ metrics.Broker, topic string, _ int32, records, bytes, _ int) {
	t := r.topic(topic)
	if t.sent == nil {
		return // not a Writer
	}
	t.sent.n.Add(int64(records))
	t.bytes.n.Add(int64(bytes))
	t.batches.n.Add(1)
}

func (r *recorder) ProduceFailed(topic string, _ int32, messages int, errType string) {
	kv := []attribute.KeyValue{semconv.MessagingOperationName("send"), semconv.ErrorTypeKey.String(errType)}
	if r.m.topics {
		kv = append(kv, semconv.MessagingDestinationName(topic))
	}
	r.m.sentS.get(r.with(kv...)...).n.Add(int64(messages))
}

func (r *recorder) Resent(cause metrics.ResendCause) {
	r.m.resends.Add(bg, 1, addOpts(r.with(AttrResendCause.String(cause.String()))...)...)
}

func (r *recorder) ProducerID(id int64, _ int16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if id < 0 {
		if r.idempotent {
			r.idempotent = false
			r.m.idempotent.Add(bg, -1, r.client...)
		}
		return
	}
	if r.sawID {
		r.m.epochBumps.Add(bg, 1, r.client...)
	}
	r.sawID = true
}

func (r *recorder) Fetched(b metrics.Broker, _ string, _ int32, _, _, compressed int) {
	if a := r.broker(b); a.fetch != nil {
		a.fetch.n.Add(int64(compressed))
	}
}

func (r *recorder) Consumed(topic string, p int32, messages, bytes int, lag int64) {
	t := r.topic(topic)
	if t.consumed == nil {
		return // not a Reader
	}
	t.consumed.n.Add(int64(messages))
	t.bytes.n.Add(int64(bytes))
	k := partition{topic, p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	old := r.lags[k]
	r.lags[k] = lagEntry{lag, t}
	t.lag.n.Add(lag - old.lag)
}

func (r *recorder) Released(topic string, p int32) {
	k := partition{topic, p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.lags[k]; ok {
		delete(r.lags, k)
		e.attrs.lag.n.Add(-e.lag)
	}
	if r.followers[k] {
		r.m.followers.Add(bg, -1, r.client...)
	}
	delete(r.followers, k)
}

func (r *recorder) Retried(op metrics.Op) {
	r.m.retries.Add(bg, 1, addOpts(r.with(AttrOp.String(op.String()))...)...)
}

func (r *recorder) FetchSource(topic string, p int32, _ metrics.Broker, follower bool) {
	k := partition{topic, p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.followers == nil {
		return
	}
	was := r.followers[k]
	r.followers[k] = follower
	switch {
	case follower && !was:
		r.m.followers.Add(bg, 1, r.client...)
	case !follower && was:
		r.m.followers.Add(bg, -1, r.client...)
	}
}

func (r *recorder) ZoneFallback(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.fallback == on {
		return
	}
	r.fallback = on
	if on {
		r.m.fallback.Add(bg, 1, r.client...)
	} else {
		r.m.fallback.Add(bg, -1, r.client...)
	}
}

func (r *recorder) Queried(store string, outcome metrics.QueryOutcome, chosen metrics.Copy, attempts int, d time.Duration) {
	var st []attribute.KeyValue
	if r.m.topics {
		st = append(st, AttrStore.String(store))
	}
	out := AttrOutcome.String(outcome.String())
	r.m.queries.Add(bg, 1, addOpts(r.with(append(st, out, AttrCopy.String(chosen.String()))...)...)...)
	r.m.attempts.Add(bg, int64(attempts), addOpts(r.with(st...)...)...)
	r.m.queryDuration.Record(bg, d.Seconds(), recordOpts(r.with(out)...)...)
}

func (r *recorder) TxnBegun() { r.m.txnBegun.Add(bg, 1, r.client...) }

func (r *recorder) TxnEnded(outcome metrics.TxnOutcome, d time.Duration) {
	out := AttrTxnOutcome.String(outcome.String())
	r.m.txns.Add(bg, 1, addOpts(r.with(out)...)...)
	r.m.txnDuration.Record(bg, d.Seconds(), recordOpts(r.with()...)...)
}

// Closed takes the client's share out of the up-down counters.
func (r *recorder) Closed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	for k, e := range r.lags {
		e.attrs.lag.n.Add(-e.lag)
		delete(r.lags, k)
	}
	n := int64(0)
	for _, f := range r.followers {
		if f {
			n++
		}
	}
	if n > 0 {
		r.m.followers.Add(bg, -n, r.client...)
	}
	if r.fallback {
		r.m.fallback.Add(bg, -1, r.client...)
	}
	if r.idempotent {
		r.m.idempotent.Add(bg, -1, r.client...)
	}
}
