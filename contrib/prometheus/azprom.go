// Package azprom exports the metrics of azkafka's clients (sdk.Writer,
// sdk.Reader, the kafka-go Dialers and Transports of sdk.NewAZAwareDialer
// and sdk.NewTransport, sdk.TxnWriter and sdk.Processor, iq.Client) to
// Prometheus, zone signals included: the share of bytes that crosses
// zones, connections closed by the peer, re-dials and limiter waits,
// resends by cause, fetch from follower and the zone fallback; and
// transactions by outcome. Its import path is
// github.com/azkafka/azkafka/contrib/prometheus, a module of its own, so
// that azkafka's core needs no Prometheus dependency.
//
// One Collector serves every client of a process: register it once and
// hand it to each client.
//
//	c := azprom.New()
//	prometheus.MustRegister(c)
//	w, err := sdk.NewWriter(&kafka.Writer{...}, sdk.WithMetrics(c))
//	r, err := sdk.NewReader(kafka.ReaderConfig{...}, sdk.WithMetrics(c))
//	q, err := iq.NewClient(src, iq.WithMetrics(c))
//	http.Handle("/metrics", promhttp.Handler())
//
// Every family is named azkafka_..., counters end in _total and units are
// in the names (_bytes, _seconds). Labels are bounded: client_id (the
// application's own client ID, the first segment of the Kafka client ID;
// the session ID appears only in azkafka_client_info), az (the client's
// zone), broker (host:port) and rack of the cluster's brokers, in_zone
// ("true", "false", or "unknown" when the client's AZ or the broker's rack
// is), and fixed words (cause, reason, error, op, outcome, copy, api).
// Topics (and iq stores) are labels only with WithTopicLabels; partitions
// never. The README's Metrics section lists the families and
// dashboard.json is a Grafana dashboard of them.
//
// The hooks a client calls per request and per batch allocate nothing;
// gauges that describe a client's state (lag, followers, fallback,
// idempotence) drop its share when it is closed. A Collector is safe for
// concurrent use.
package azprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/azkafka/azkafka/metrics"
)

// Option configures a Collector.
type Option func(*Collector)

// WithTopicLabels adds a topic label to the Writer's and Reader's message,
// byte, error and lag families, and a store label to iq's. Use it when
// the clients write to and read from a bounded set of topics. Default:
// off.
func WithTopicLabels() Option { return func(c *Collector) { c.topics = true } }

// WithDurationBuckets sets the buckets, in seconds, of the request and
// query duration histograms. Default: DefaultDurationBuckets.
func WithDurationBuckets(b []float64) Option {
	return func(c *Collector) { c.buckets = append([]float64(nil), b...) }
}

// DefaultDurationBuckets are the histogram buckets, in seconds, from half
// a millisecond to a Fetch's default MaxWait (10 s).
var DefaultDurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Collector is a prometheus.Collector of azkafka's metrics and the
// metrics.Provider to hand to the clients (sdk.WithMetrics,
// iq.WithMetrics). Create it with New.
type Collector struct {
	topics  bool
	buckets []float64

	clientInfo *prometheus.GaugeVec

	dials       *prometheus.CounterVec
	connsOpen   *prometheus.GaugeVec
	connCloses  *prometheus.CounterVec
	redials     *prometheus.CounterVec
	dialWait    *prometheus.CounterVec
	sentBytes   *prometheus.CounterVec
	recvBytes   *prometheus.CounterVec
	reqDuration *prometheus.HistogramVec
	reqErrors   *prometheus.CounterVec
	absorbed    *prometheus.CounterVec

	writerMessages   *prometheus.CounterVec
	writerBytes      *prometheus.CounterVec
	writerBatches    *prometheus.CounterVec
	writerErrors     *prometheus.CounterVec
	writerResends    *prometheus.CounterVec
	writerEpochBumps *prometheus.CounterVec
	writerIdempotent *prometheus.GaugeVec

	readerMessages   *prometheus.CounterVec
	readerBytes      *prometheus.CounterVec
	readerFetchBytes *prometheus.CounterVec
	readerLag        *prometheus.GaugeVec
	readerRetries    *prometheus.CounterVec
	readerFollowers  *prometheus.GaugeVec
	readerFallback   *prometheus.GaugeVec

	iqQueries  *prometheus.CounterVec
	iqAttempts *prometheus.CounterVec
	iqDuration *prometheus.HistogramVec

	txnBegun    *prometheus.CounterVec
	txnEnded    *prometheus.CounterVec
	txnDuration *prometheus.HistogramVec

	all []prometheus.Collector
}

var _ metrics.Provider = (*Collector)(nil)

// New returns a Collector; register it (prometheus.MustRegister) and hand
// it to the clients.
func New(opts ...Option) *Collector {
	c := &Collector{buckets: DefaultDurationBuckets}
	for _, o := range opts {
		o(c)
	}
	client := []string{"client_id", "az"}
	broker := []string{"client_id", "az", "broker"}
	zoned := []string{"client_id", "az", "broker", "rack", "in_zone"}
	topical := func(labels ...string) []string {
		if c.topics {
			return append(labels, "topic")
		}
		return labels
	}
	iqLabels := []string{"az", "outcome", "copy"}
	iqAttempts := []string{"az"}
	if c.topics {
		iqLabels = append(iqLabels, "store")
		iqAttempts = append(iqAttempts, "store")
	}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		c.all = append(c.all, v)
		return v
	}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		c.all = append(c.all, v)
		return v
	}
	histogram := func(name, help string, labels []string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: c.buckets}, labels)
		c.all = append(c.all, v)
		return v
	}

	c.clientInfo = gauge("azkafka_client_info",
		"A client instance (1 while it is open): its kind, user client ID, session ID, availability zone and where the zone came from.",
		[]string{"kind", "client_id", "session_id", "az", "az_source"})

	c.dials = counter("azkafka_dials_total",
		"Connection attempts that reached the network, by result (ok, error).", append(broker, "result"))
	c.connsOpen = gauge("azkafka_connections_open",
		"Connections open now.", broker)
	c.connCloses = counter("azkafka_connection_closes_total",
		"Connections ended, by cause: local, peer (the peer closed a connection that served: interzone load balancing, a broker leaving), peer_early (closed before serving: a broker limiting connection creation), local_early.",
		append(broker, "cause"))
	c.redials = counter("azkafka_redials_total",
		"Dials that waited the re-dial backoff after a failure or a peer's close.", broker)
	c.dialWait = counter("azkafka_dial_wait_seconds_total",
		"Time dials waited before reaching the network, by reason (limiter: the connection-rate limit; redial: the re-dial backoff).",
		append(client, "reason"))
	c.sentBytes = counter("azkafka_broker_sent_bytes_total",
		"Bytes of requests written to each broker (Writer, Reader).", zoned)
	c.recvBytes = counter("azkafka_broker_received_bytes_total",
		"Bytes of responses read from each broker (Writer, Reader).", zoned)
	c.reqDuration = histogram("azkafka_request_duration_seconds",
		"Time from writing a request to reading its response, by Kafka API (a Fetch's includes the broker's wait for records).",
		append(client, "api"))
	c.reqErrors = counter("azkafka_request_errors_total",
		"Requests whose response was lost, by Kafka API and error type.", append(broker, "api", "error"))
	c.absorbed = counter("azkafka_errors_absorbed_total",
		"Errors the client waited out instead of returning, by type.", append(client, "error"))

	c.writerMessages = counter("azkafka_writer_messages_total",
		"Messages the brokers acknowledged, each once.", topical(client...))
	c.writerBytes = counter("azkafka_writer_bytes_total",
		"Uncompressed bytes of the acknowledged records.", topical(client...))
	c.writerBatches = counter("azkafka_writer_batches_total",
		"Record batches the brokers acknowledged.", topical(client...))
	c.writerErrors = counter("azkafka_writer_errors_total",
		"Messages that failed for good (WriteMessages or Completion reports the error), by error type.", topical(append(client, "error")...))
	c.writerResends = counter("azkafka_writer_resends_total",
		"Produce requests sent again after their connection failed before the answer (cause connection), and resent batches a restarted broker had already stored, counted delivered instead of stored twice (cause stored).",
		append(client, "cause"))
	c.writerEpochBumps = counter("azkafka_writer_epoch_bumps_total",
		"Changes of an idempotent Writer's producer ID or epoch after its first.", client)
	c.writerIdempotent = gauge("azkafka_writer_idempotent",
		"Writers producing idempotently now.", client)

	c.readerMessages = counter("azkafka_reader_messages_total",
		"Messages the Reader took from the engine to hand out.", topical(client...))
	c.readerBytes = counter("azkafka_reader_bytes_total",
		"Key and value bytes of those messages.", topical(client...))
	c.readerFetchBytes = counter("azkafka_reader_fetch_bytes_total",
		"Bytes of record batches fetched from each broker, as they crossed the network.", zoned)
	c.readerLag = gauge("azkafka_reader_lag_messages",
		"Messages behind the high watermark, summed over the partitions the Reader consumes, as of each partition's last fetch.",
		topical(client...))
	c.readerRetries = counter("azkafka_reader_retries_total",
		"Reader operations tried again after a transient error, by op (fetch, commit, list_offsets).", append(client, "op"))
	c.readerFollowers = gauge("azkafka_reader_follower_partitions",
		"Partitions fetched from a follower now (fetch from follower, KIP-392).", client)
	c.readerFallback = gauge("azkafka_reader_zone_fallback",
		"Readers fetching from the leaders now because a broker of their zone does not answer.", client)

	c.iqQueries = counter("azkafka_iq_queries_total",
		"Interactive queries by outcome (ok, no_replica, failed, canceled) and the copy that answered or was tried last (active, standby_in_zone, standby_other_zone, none).",
		iqLabels)
	c.iqAttempts = counter("azkafka_iq_query_attempts_total",
		"Replicas interactive queries tried.", iqAttempts)
	c.iqDuration = histogram("azkafka_iq_query_duration_seconds",
		"Duration of interactive queries, failover included.", []string{"az", "outcome"})

	c.txnBegun = counter("azkafka_transactions_begun_total",
		"Transactions a TxnWriter or Processor began.", client)
	c.txnEnded = counter("azkafka_transactions_total",
		"Transactions ended, by outcome: committed, or aborted by abort (Abort, or the Processor's function failed), rebalance, timeout, fenced (a zombie), failed (a write or the commit), close.",
		append(client, "outcome"))
	c.txnDuration = histogram("azkafka_transaction_duration_seconds",
		"Time from a transaction's begin to its end, committed or aborted.", client)
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.all {
		v.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.all {
		v.Collect(ch)
	}
}

// Recorder implements metrics.Provider: the clients call it, once each.
func (c *Collector) Recorder(mc metrics.Client) metrics.Recorder { return newRecorder(c, mc) }
