package azotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	azotel "github.com/azkafka/azkafka/contrib/otel"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

func newMetrics(t *testing.T, opts ...azotel.MetricsOption) (*azotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := azotel.NewMetrics(append([]azotel.MetricsOption{azotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m, reader
}

// collect returns every metric the reader holds, by name, checking that
// they come from azotel's scope.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != azotel.ScopeName || sm.Scope.SchemaURL != "https://opentelemetry.io/schemas/1.43.0" {
			t.Errorf("scope %+v", sm.Scope)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// point returns the value of the data point of an int64 sum whose
// attributes are exactly attrs.
func point(t *testing.T, m metricdata.Metrics, attrs ...attribute.KeyValue) (int64, bool) {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", m.Name, m.Data)
	}
	want := attribute.NewSet(attrs...)
	for _, dp := range sum.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value, true
		}
	}
	return 0, false
}

func clientOptions(m *azotel.Metrics, id string) []sdk.Option {
	return []sdk.Option{
		sdk.WithAZ("az-a"), sdk.WithClientID(id), sdk.WithMetrics(m),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithMaxConnRate(0, 1),
	}
}

var (
	kafkaSystem = attribute.String("messaging.system", "kafka")
	azA         = attribute.String("azkafka.az", "az-a")
)

// TestMetricsWriterAndReader: a Writer and a group Reader on the embedded
// broker, read with the SDK's ManualReader: the semantic conventions'
// messaging metrics and azkafka's bytes per broker and zone.
func TestMetricsWriterAndReader(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("orders", 3))
	m, reader := newMetrics(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "orders", RequiredAcks: kafka.RequireAll}, clientOptions(m, "billing")...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		msgs := make([]kafka.Message, 100)
		for j := range msgs {
			msgs[j] = kafka.Message{Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: []byte("value")}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	w.Close() // the engine's batch events have all come once it is closed
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "reports", Topic: "orders", MaxWait: 100 * time.Millisecond},
		clientOptions(m, "reports")...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 300 {
		if _, err := r.FetchMessage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, reader)

	writer := []attribute.KeyValue{kafkaSystem, attribute.String("messaging.client.id", "billing"), azA}
	readerAttrs := []attribute.KeyValue{kafkaSystem, attribute.String("messaging.client.id", "reports"), azA, attribute.String("messaging.consumer.group.name", "reports")}
	sum := func(name, unit, desc string, monotonic bool, attrs []attribute.KeyValue, v int64) metricdata.Metrics {
		return metricdata.Metrics{Name: name, Unit: unit, Description: desc, Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: monotonic,
			DataPoints: []metricdata.DataPoint[int64]{{Attributes: attribute.NewSet(attrs...), Value: v}},
		}}
	}
	metricdatatest.AssertEqual(t,
		sum("messaging.client.sent.messages", "{message}", "Number of messages producer attempted to send to the broker.", true,
			append(writer, attribute.String("messaging.operation.name", "send")), 300),
		got["messaging.client.sent.messages"], metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertEqual(t,
		sum("messaging.client.consumed.messages", "{message}", "Number of messages that were delivered to the application.", true,
			append(readerAttrs, attribute.String("messaging.operation.name", "poll")), 300),
		got["messaging.client.consumed.messages"], metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertEqual(t,
		sum("azkafka.reader.lag", "{message}", "Messages behind the high watermark, summed over the partitions the Readers consume, as of each partition's last fetch.", false,
			readerAttrs, 0),
		got["azkafka.reader.lag"], metricdatatest.IgnoreTimestamp())

	host, port, _ := net.SplitHostPort(c.Addrs()[0])
	p, _ := strconv.Atoi(port)
	server := []attribute.KeyValue{attribute.String("server.address", host), attribute.Int("server.port", p)}
	hist, ok := got["messaging.client.operation.duration"].Data.(metricdata.Histogram[float64])
	if !ok || got["messaging.client.operation.duration"].Unit != "s" {
		t.Fatalf("messaging.client.operation.duration: %+v", got["messaging.client.operation.duration"])
	}
	ops := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		name, _ := dp.Attributes.Value("messaging.operation.name")
		typ, _ := dp.Attributes.Value("messaging.operation.type")
		addr, _ := dp.Attributes.Value("server.address")
		if addr.AsString() != host {
			t.Errorf("duration point %v: server.address, want %s", dp.Attributes.ToSlice(), host)
		}
		ops[name.AsString()+"/"+typ.AsString()] += dp.Count
	}
	if ops["send/send"] < 3 || ops["poll/receive"] == 0 || ops["commit/settle"] != 0 {
		t.Errorf("operation durations %v: want at least 3 sends, some polls, no commit", ops)
	}
	zone := append(server, attribute.String("azkafka.broker.rack", "krack"), attribute.String("azkafka.broker.in_zone", "false"))
	for _, who := range [][]attribute.KeyValue{writer, readerAttrs} {
		for _, dir := range []string{"transmit", "receive"} {
			attrs := append(append(append([]attribute.KeyValue{}, who...), zone...), attribute.String("network.io.direction", dir))
			if v, ok := point(t, got["azkafka.network.io"], attrs...); !ok || v <= 0 {
				t.Errorf("azkafka.network.io %v = %d (found %v), want > 0", attrs, v, ok)
			}
		}
	}
	if v, ok := point(t, got["azkafka.connection.open"], append(append([]attribute.KeyValue{}, readerAttrs...), server...)...); !ok || v <= 0 {
		t.Errorf("azkafka.connection.open of the Reader = %d (found %v), want > 0", v, ok)
	}
	if v, _ := point(t, got["azkafka.writer.idempotent"], writer...); v != 0 {
		t.Errorf("azkafka.writer.idempotent = %d after the Writer closed, want 0", v)
	}
}

// TestUpDownCountersFollowClients: lag, followers, the zone fallback and
// idempotence add up over the clients and drop a client's share when it
// closes.
func TestUpDownCountersFollowClients(t *testing.T) {
	m, reader := newMetrics(t)
	rc := metrics.Client{Kind: metrics.KindReader, UserID: "r", AZ: "az-a"}
	r1, r2 := m.Recorder(rc), m.Recorder(rc)
	b := metrics.Broker{NodeID: 1, Addr: "b1:9092", Rack: "az-a", InZone: true}
	r1.Consumed("t", 0, 10, 100, 5)
	r1.Consumed("t", 1, 10, 100, 7)
	r1.Consumed("t", 0, 3, 30, 2)
	r2.Consumed("t", 0, 1, 10, 4)
	r1.FetchSource("t", 0, b, true)
	r1.FetchSource("t", 0, b, true)
	r1.FetchSource("t", 1, b, true)
	r1.ZoneFallback(true)
	r1.Released("t", 1)
	w := m.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a", Idempotent: true})
	w.ProducerID(5, 0)
	w.ProducerID(5, 1)

	rAttrs := []attribute.KeyValue{kafkaSystem, attribute.String("messaging.client.id", "r"), azA}
	wAttrs := []attribute.KeyValue{kafkaSystem, attribute.String("messaging.client.id", "w"), azA}
	check := func(when string, want map[string]int64) {
		t.Helper()
		got := collect(t, reader)
		for name, v := range want {
			attrs := rAttrs
			if name == "azkafka.writer.idempotent" || name == "azkafka.writer.epoch_bumps" {
				attrs = wAttrs
			}
			if g, _ := point(t, got[name], attrs...); g != v {
				t.Errorf("%s: %s = %d, want %d", when, name, g, v)
			}
		}
	}
	check("open", map[string]int64{"azkafka.reader.lag": 6, "azkafka.reader.follower_partitions": 1, "azkafka.reader.zone_fallback": 1,
		"azkafka.writer.idempotent": 1, "azkafka.writer.epoch_bumps": 1})
	r1.Closed()
	w.ProducerID(-1, -1)
	check("one reader closed, the writer no longer idempotent", map[string]int64{"azkafka.reader.lag": 4, "azkafka.reader.follower_partitions": 0,
		"azkafka.reader.zone_fallback": 0, "azkafka.writer.idempotent": 0})
	r2.Closed()
	w.Closed()
	check("all closed", map[string]int64{"azkafka.reader.lag": 0, "azkafka.writer.idempotent": 0})
}

// TestTopicAttributes: with WithTopicAttributes the message counters
// carry messaging.destination.name; without, they do not.
func TestTopicAttributes(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			var opts []azotel.MetricsOption
			if on {
				opts = append(opts, azotel.WithTopicAttributes())
			}
			m, reader := newMetrics(t, opts...)
			w := m.Recorder(metrics.Client{Kind: metrics.KindWriter, AZ: "az-a"})
			b := metrics.Broker{NodeID: 1, Addr: "b1:9092"}
			w.Produced(b, "orders", 0, 10, 100, 50)
			w.Produced(b, "payments", 0, 5, 50, 25)
			w.ProduceFailed("orders", 0, 2, "delivery_timeout")
			sent := collect(t, reader)["messaging.client.sent.messages"]
			send := []attribute.KeyValue{kafkaSystem, azA, attribute.String("messaging.operation.name", "send")}
			failed := append(append([]attribute.KeyValue{}, send...), attribute.String("error.type", "delivery_timeout"))
			want := map[*[]attribute.KeyValue]int64{&send: 15, &failed: 2}
			if on {
				orders := append(append([]attribute.KeyValue{}, send...), attribute.String("messaging.destination.name", "orders"))
				payments := append(append([]attribute.KeyValue{}, send...), attribute.String("messaging.destination.name", "payments"))
				failed = append(failed, attribute.String("messaging.destination.name", "orders"))
				want = map[*[]attribute.KeyValue]int64{&orders: 10, &payments: 5, &failed: 2}
			}
			for attrs, v := range want {
				if g, ok := point(t, sent, *attrs...); g != v || !ok {
					t.Errorf("sent %v = %d, want %d", *attrs, g, v)
				}
			}
			if n := len(sent.Data.(metricdata.Sum[int64]).DataPoints); n != len(want) {
				t.Errorf("%d data points, want %d", n, len(want))
			}
		})
	}
}

// TestHotPathAllocatesNothing: the events a client sends per request,
// batch and poll allocate nothing once their series exist, with the
// OpenTelemetry SDK's meter.
func TestHotPathAllocatesNothing(t *testing.T) {
	m, _ := newMetrics(t)
	metricstest.HotPathAllocations(t, m)
	mt, _ := newMetrics(t, azotel.WithTopicAttributes())
	metricstest.HotPathAllocations(t, mt)
}

// TestTransactions: transactions begun and ended by outcome, with their
// durations.
func TestTransactions(t *testing.T) {
	m, reader := newMetrics(t)
	r := m.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a", TransactionalID: "w-0"})
	for range 3 {
		r.TxnBegun()
	}
	r.TxnEnded(metrics.TxnCommitted, 20*time.Millisecond)
	r.TxnEnded(metrics.TxnCommitted, 30*time.Millisecond)
	r.TxnEnded(metrics.TxnFenced, time.Second)
	got := collect(t, reader)
	attrs := []attribute.KeyValue{kafkaSystem, attribute.String("messaging.client.id", "w"), azA}
	if v, _ := point(t, got["azkafka.transaction.begun"], attrs...); v != 3 {
		t.Errorf("azkafka.transaction.begun = %d, want 3", v)
	}
	for outcome, want := range map[string]int64{"committed": 2, "fenced": 1, "abort": 0} {
		if v, _ := point(t, got["azkafka.transactions"], append(attrs, azotel.AttrTxnOutcome.String(outcome))...); v != want {
			t.Errorf("azkafka.transactions{outcome=%s} = %d, want %d", outcome, v, want)
		}
	}
	h, ok := got["azkafka.transaction.duration"].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 3 || h.DataPoints[0].Sum != 1.05 {
		t.Errorf("azkafka.transaction.duration: %+v, want one point of 3 transactions summing 1.05 s", got["azkafka.transaction.duration"].Data)
	}
}
