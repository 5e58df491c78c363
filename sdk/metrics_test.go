package sdk_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

// kfakeRack is the rack kfake gives every broker.
const kfakeRack = "krack"

// TestMetricsWriter: an idempotent Writer reports who it is, its dials and
// their ends, its produce requests, every acknowledged record once (in
// batches), its producer ID, and its Close.
func TestMetricsWriter(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("mw", 3))
	p := metricstest.New()
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(c.Addrs()...),
		Topic:        "mw",
		RequiredAcks: kafka.RequireAll,
	}, testOptions(t, sdk.WithAZ(kfakeRack), sdk.WithClientID("billing"), sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	rec := p.Only(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs := deliverytest.Messages("mw", 100)
	for range 3 {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	batches := st.BatchSize.Count + w.Stats().BatchSize.Count // the engine's batch events may follow a call's return

	cl := rec.Client()
	want := metrics.Client{
		Kind: metrics.KindWriter, ClientID: st.SDK.ClientID, UserID: "billing", SessionID: cl.SessionID,
		AZ: kfakeRack, AZSource: "option", Topic: "mw", Idempotent: true,
	}
	if cl != want || cl.SessionID == "" || !strings.Contains(cl.ClientID, cl.SessionID) {
		t.Errorf("Client = %+v, want %+v with the session ID of the client ID", cl, want)
	}
	counts := rec.Counts()
	if counts["produced records"] != 300 {
		t.Errorf("produced records = %d, want 300 (each acknowledged record once)", counts["produced records"])
	}
	if valueBytes := int64(3 * 100 * 2 * len(msgs[0].Value)); counts["produced bytes"] < valueBytes || counts["produced compressed bytes"] == 0 {
		t.Errorf("produced bytes = %d (compressed %d), want at least the keys and values' %d", counts["produced bytes"], counts["produced compressed bytes"], valueBytes)
	}
	if b := counts["produced batches"]; b != batches || b < 3 {
		t.Errorf("produced batches = %d, want Stats' %d (at least one per call)", b, batches)
	}
	if counts["requests api=0"] < 3 || counts["request bytes written"] == 0 || counts["request bytes read"] == 0 {
		t.Errorf("requests: %v, want at least 3 Produce requests with bytes both ways", counts)
	}
	for k := range counts {
		if strings.HasPrefix(k, "request errors") || strings.HasPrefix(k, "failed") || strings.HasPrefix(k, "resent") {
			t.Errorf("%s = %d on a healthy broker", k, counts[k])
		}
	}
	for addr, b := range rec.Brokers() {
		if !slices.Contains(c.Addrs(), addr) || b.Rack != kfakeRack || !b.InZone {
			t.Errorf("broker %+v: want one of %v, rack %s, in zone", b, c.Addrs(), kfakeRack)
		}
	}
	if ids := rec.ProducerIDs(); len(ids) != 1 || ids[0] != [2]int64{st.SDK.ProducerID, int64(st.SDK.ProducerEpoch)} {
		t.Errorf("ProducerID events %v, want one: [%d %d]", ids, st.SDK.ProducerID, st.SDK.ProducerEpoch)
	}
	if n := rec.Count("client closed"); n != 1 {
		t.Errorf("Closed reported %d times, want 1", n)
	}
	dialed := rec.Count("dialed ok")
	if dialed == 0 || dialed != st.SDK.Conn.ConnectionsCreated {
		t.Errorf("dialed ok = %d, want Stats' ConnectionsCreated %d (> 0)", dialed, st.SDK.Conn.ConnectionsCreated)
	}
	rec.Wait(t, "every connection to end", func() bool { return rec.Count("closed local") == rec.Count("dialed ok") })
}

// TestMetricsReader: a group Reader reports every message it hands out
// once, its lag (0 once all is read), the fetch source of each partition
// (the leader, in zone here), and its Close.
func TestMetricsReader(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("mr", 3))
	sent := deliverytest.Messages("mr", 600)
	produceTo(t, c.Addrs(), "mr", sent)
	p := metricstest.New()
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers: c.Addrs(), GroupID: "mr-group", Topic: "mr", MaxWait: 100 * time.Millisecond, MaxBytes: 4 << 10,
	}, testOptions(t, sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec := p.Only(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var bytes int64
	for range sent {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bytes += int64(len(m.Key) + len(m.Value))
	}
	cl := rec.Client()
	if cl.Kind != metrics.KindReader || cl.Group != "mr-group" || cl.Topic != "mr" || cl.AZ != "az-a" || !cl.FetchFromFollower {
		t.Errorf("Client = %+v", cl)
	}
	counts := rec.Counts()
	if counts["consumed messages"] != int64(len(sent)) || counts["consumed bytes"] != bytes {
		t.Errorf("consumed %d messages, %d bytes; want %d, %d", counts["consumed messages"], counts["consumed bytes"], len(sent), bytes)
	}
	if counts["fetched records"] < int64(len(sent)) || counts["fetched compressed bytes"] == 0 || counts["requests api=1"] == 0 {
		t.Errorf("fetched %d records (%d bytes) in %d requests, want at least %d", counts["fetched records"], counts["fetched compressed bytes"], counts["requests api=1"], len(sent))
	}
	lags := rec.Lags()
	if len(lags) != 3 {
		t.Errorf("lags of %d partitions, want 3: %v", len(lags), lags)
	}
	for tp, lag := range lags {
		if lag != 0 {
			t.Errorf("lag of %v = %d after reading everything", tp, lag)
		}
	}
	sources := rec.Sources()
	if len(sources) != 3 {
		t.Errorf("fetch sources of %d partitions, want 3: %v", len(sources), sources)
	}
	for tp, s := range sources {
		if s.Follower || s.Broker.NodeID != 0 || s.Broker.InZone {
			t.Errorf("%v fetched from %+v, want the leader, node 0, not in zone az-a", tp, s)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := rec.Count("client closed"); n != 1 {
		t.Errorf("Closed reported %d times, want 1", n)
	}
}

// TestMetricsReaderLag: a partition Reader whose polls return part of the
// partition reports, at every poll, the lag behind the high watermark.
func TestMetricsReaderLag(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("ml", 1))
	const n = 500
	produceTo(t, c.Addrs(), "ml", deliverytest.Messages("ml", n))
	p := metricstest.New()
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers: c.Addrs(), Topic: "ml", MaxWait: 100 * time.Millisecond, MaxBytes: 2 << 10, QueueCapacity: 50,
	}, testOptions(t, sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range n {
		if _, err := r.FetchMessage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	events := p.Only(t).ConsumedEvents()
	if len(events) < 2 {
		t.Fatalf("%d Consumed events, want several (polls of at most 50)", len(events))
	}
	read := 0
	for i, e := range events {
		read += e.Messages
		if e.Lag != int64(n-read) {
			t.Errorf("event %d: lag %d after %d messages, want %d", i, e.Lag, read, n-read)
		}
	}
}

// TestMetricsFetchFromFollower: the Reader reports each partition's fetch
// source: the zone's follower when the leader names it, the leader with
// fetch from follower off.
func TestMetricsFetchFromFollower(t *testing.T) {
	for _, follow := range []bool{true, false} {
		t.Run(map[bool]string{true: "follow", false: "leader"}[follow], func(t *testing.T) {
			t.Parallel()
			fc := newFollowerCluster(t, "mfff", 3)
			sent := deliverytest.Messages("mfff", 300)
			fc.produce(t, sent)
			p := metricstest.New()
			r := fc.reader(t, fc.group("mfff"), nil, sdk.WithFetchFromFollower(follow), sdk.WithMetrics(p))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			readAll(ctx, t, r, map[partitionOffset]bool{}, map[string]int{}, fc.ends(t), nil)
			node := int32(0)
			if follow {
				node = 1
			}
			sources := p.Only(t).Sources()
			if len(sources) != 3 {
				t.Fatalf("fetch sources of %d partitions, want 3: %v", len(sources), sources)
			}
			for tp, s := range sources {
				if s.Broker.NodeID != node || s.Follower != follow || !s.Broker.InZone || s.Broker.Addr != fc.addr[node] {
					t.Errorf("%v: source %+v, want node %d (%s) in zone, follower %v", tp, s, node, fc.addr[node], follow)
				}
			}
		})
	}
}

// TestMetricsDialerTransport: the kafka-go clients of NewAZAwareDialer and
// NewTransport report their connections.
func TestMetricsDialerTransport(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("mdt", 1))
	p := metricstest.New()
	d, err := sdk.NewAZAwareDialer(nil, testOptions(t, sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sdk.NewTransport(nil, testOptions(t, sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadPartitions("mdt"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := (&kafka.Client{Addr: kafka.TCP(c.Addrs()...), Transport: tr}).Metadata(ctx, &kafka.MetadataRequest{}); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	recs := p.Recorders()
	if len(recs) != 2 || recs[0].Client().Kind != metrics.KindDialer || recs[1].Client().Kind != metrics.KindTransport {
		t.Fatalf("recorders %v, want a dialer's and a transport's", recs)
	}
	for _, rec := range recs {
		if rec.Client().ClientID == "" || rec.Count("dialed ok") == 0 {
			t.Errorf("%v: client %+v, counts %v", rec.Client().Kind, rec.Client(), rec.Counts())
		}
		rec.Wait(t, rec.Client().Kind.String()+" connections to end", func() bool { return rec.Count("closed local") == rec.Count("dialed ok") })
	}
}

// batchCounter is a franz-go hook counting the records of produced
// batches.
type batchCounter struct{ records atomic.Int64 }

func (b *batchCounter) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	b.records.Add(int64(m.NumRecords))
}

// TestWithEngineHooks: franz-go hooks passed with WithEngineHooks see the
// engine's batches.
func TestWithEngineHooks(t *testing.T) {
	t.Parallel()
	h := &batchCounter{}
	w := writeHooked(t, "meh", 2, 50, sdk.WithEngineHooks(h))
	w.Close() // the engine's hooks have run once it returns
	if n := h.records.Load(); n != 50 {
		t.Fatalf("the hook saw %d records, want 50", n)
	}
}

// writeHooked writes n messages synchronously, acks=all, to topic (of
// partitions, on an embedded broker of its own) through a Writer made with
// opts, and returns the Writer, open.
func writeHooked(t *testing.T, topic string, partitions, n int, opts ...sdk.Option) *sdk.Writer {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic(topic, partitions))
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: topic, RequiredAcks: kafka.RequireAll},
		testOptions(t, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, deliverytest.Messages(topic, n)...); err != nil {
		t.Fatal(err)
	}
	return w
}

// slowBatchHook is a franz-go batch hook that takes its time, so that the
// engine's reports of a batch come well after the batch's promises.
type slowBatchHook struct{ batchCounter }

func (s *slowBatchHook) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, partition int32, m kgo.ProduceBatchMetrics) {
	time.Sleep(300 * time.Millisecond)
	s.batchCounter.OnProduceBatchWritten(meta, topic, partition, m)
}

// TestWriterCloseWaitsForBatchHooks: the engine reports a batch on a
// goroutine of its own after its records' promises, here 300 ms later;
// once Close returns, the batch has reached WithMetrics, Stats and the
// engine hooks all the same.
func TestWriterCloseWaitsForBatchHooks(t *testing.T) {
	t.Parallel()
	h := &slowBatchHook{}
	p := metricstest.New()
	w := writeHooked(t, "mslow", 1, 2, sdk.WithEngineHooks(h), sdk.WithMetrics(p))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := h.records.Load(); n != 2 {
		t.Errorf("the engine hook saw %d records once Close returned, want 2", n)
	}
	if n := p.Only(t).Counts()["produced records"]; n != 2 {
		t.Errorf("WithMetrics saw %d produced records once Close returned, want 2", n)
	}
	if st := w.Stats(); st.BatchSize.Count == 0 {
		t.Errorf("Stats after Close: BatchSize %+v, want the batch", st.BatchSize)
	}
}

// produceTo writes msgs to topic with a kafka-go Writer.
func produceTo(t *testing.T, addrs []string, topic string, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(addrs...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchSize: 20, BatchTimeout: time.Millisecond}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}
