package azprom_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/segmentio/kafka-go"

	azprom "github.com/azkafka/azkafka/contrib/prometheus"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

// kfakeRack is the rack kfake gives every broker.
const kfakeRack = "krack"

func clientOptions(c *azprom.Collector, id string) []sdk.Option {
	return []sdk.Option{
		sdk.WithAZ("az-a"), sdk.WithClientID(id), sdk.WithMetrics(c),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithMaxConnRate(0, 1),
	}
}

// scrape reads url as Prometheus would and returns each sample's value by
// its series ("name{label="value",...}", labels sorted).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[strings.Replace(key, "{", "_count{", 1)] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// TestScrapeWriterAndReader: a Writer and a group Reader on the embedded
// broker, scraped over HTTP: the messages each handled, the Reader's lag
// and instance, bytes per broker and zone, request durations, dials; and
// the families pass Prometheus' lint.
func TestScrapeWriterAndReader(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("orders", 3))
	col := azprom.New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "orders", RequiredAcks: kafka.RequireAll},
		clientOptions(col, "billing")...)
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
		clientOptions(col, "reports")...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 300 {
		if _, err := r.FetchMessage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := sdk.ParseClientID(r.Stats().SDK.ClientID)
	if err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf(`
# HELP azkafka_client_info A client instance (1 while it is open): its kind, user client ID, session ID, availability zone and where the zone came from.
# TYPE azkafka_client_info gauge
azkafka_client_info{az="az-a",az_source="option",client_id="reports",kind="reader",session_id=%q} 1
# HELP azkafka_writer_messages_total Messages the brokers acknowledged, each once.
# TYPE azkafka_writer_messages_total counter
azkafka_writer_messages_total{az="az-a",client_id="billing"} 300
# HELP azkafka_writer_idempotent Writers producing idempotently now.
# TYPE azkafka_writer_idempotent gauge
azkafka_writer_idempotent{az="az-a",client_id="billing"} 0
# HELP azkafka_reader_messages_total Messages the Reader took from the engine to hand out.
# TYPE azkafka_reader_messages_total counter
azkafka_reader_messages_total{az="az-a",client_id="reports"} 300
# HELP azkafka_reader_lag_messages Messages behind the high watermark, summed over the partitions the Reader consumes, as of each partition's last fetch.
# TYPE azkafka_reader_lag_messages gauge
azkafka_reader_lag_messages{az="az-a",client_id="reports"} 0
# HELP azkafka_reader_follower_partitions Partitions fetched from a follower now (fetch from follower, KIP-392).
# TYPE azkafka_reader_follower_partitions gauge
azkafka_reader_follower_partitions{az="az-a",client_id="reports"} 0
`, parts.SessionID)
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want),
		"azkafka_client_info", "azkafka_writer_messages_total", "azkafka_writer_idempotent",
		"azkafka_reader_messages_total", "azkafka_reader_lag_messages", "azkafka_reader_follower_partitions"); err != nil {
		t.Error(err)
	}

	got := scrape(t, srv.URL)
	zone := fmt.Sprintf(`az="az-a",broker=%q,client_id="%%s",in_zone="false",rack=%q`, c.Addrs()[0], kfakeRack)
	for _, series := range []string{
		"azkafka_broker_sent_bytes_total{" + fmt.Sprintf(zone, "billing") + "}",
		"azkafka_broker_received_bytes_total{" + fmt.Sprintf(zone, "billing") + "}",
		"azkafka_broker_received_bytes_total{" + fmt.Sprintf(zone, "reports") + "}",
		"azkafka_reader_fetch_bytes_total{" + fmt.Sprintf(zone, "reports") + "}",
		"azkafka_writer_bytes_total{az=\"az-a\",client_id=\"billing\"}",
		`azkafka_request_duration_seconds_count{api="Produce",az="az-a",client_id="billing"}`,
		`azkafka_request_duration_seconds_count{api="Fetch",az="az-a",client_id="reports"}`,
		fmt.Sprintf(`azkafka_dials_total{az="az-a",broker=%q,client_id="billing",result="ok"}`, c.Addrs()[0]),
		fmt.Sprintf(`azkafka_connections_open{az="az-a",broker=%q,client_id="reports"}`, c.Addrs()[0]),
	} {
		if got[series] <= 0 {
			t.Errorf("%s = %v, want > 0", series, got[series])
		}
	}
	if n := got[`azkafka_writer_batches_total{az="az-a",client_id="billing"}`]; n < 3 || n > 300 {
		t.Errorf("writer batches %v, want at least one per call, at most one per message", n)
	}
	for series, v := range got {
		if strings.Contains(series, "in_zone=\"true\"") || strings.HasPrefix(series, "azkafka_writer_errors_total") && v > 0 {
			t.Errorf("%s = %v: no broker is in zone az-a, and nothing failed", series, v)
		}
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	r.Close()
	after := scrape(t, srv.URL)
	for series := range after {
		if strings.HasPrefix(series, "azkafka_client_info{") {
			t.Errorf("%s after every client closed", series)
		}
	}
}

// values gathers reg into each sample's value by series, as scrape.
func values(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	return scrape(t, srv.URL)
}

func newRegistry(t *testing.T, opts ...azprom.Option) (*azprom.Collector, *prometheus.Registry) {
	t.Helper()
	col := azprom.New(opts...)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	return col, reg
}

// TestGaugesFollowClients: lag, followers, the zone fallback and
// idempotence add up over the clients of one client ID and drop a
// client's share when it goes.
func TestGaugesFollowClients(t *testing.T) {
	col, reg := newRegistry(t)
	reader := metrics.Client{Kind: metrics.KindReader, UserID: "r", SessionID: "s1", AZ: "az-a", AZSource: "env"}
	r1 := col.Recorder(reader)
	reader.SessionID = "s2"
	r2 := col.Recorder(reader)
	b := metrics.Broker{NodeID: 1, Addr: "b1:9092", Rack: "az-a", InZone: true}
	r1.Consumed("t", 0, 10, 100, 5)
	r1.Consumed("t", 1, 10, 100, 7)
	r1.Consumed("t", 0, 3, 30, 2)
	r2.Consumed("t", 0, 1, 10, 4)
	r1.FetchSource("t", 0, b, true)
	r1.FetchSource("t", 0, b, true)
	r1.FetchSource("t", 1, b, true)
	r2.FetchSource("t", 0, b, true)
	r1.ZoneFallback(true)
	r1.ZoneFallback(true)
	r1.Released("t", 1)

	writer := metrics.Client{Kind: metrics.KindWriter, UserID: "w", SessionID: "s3", AZ: "az-a", Idempotent: true}
	w := col.Recorder(writer)
	w.ProducerID(5, 0)
	w.ProducerID(5, 1)
	w.ProducerID(6, 0)

	const (
		lag       = `azkafka_reader_lag_messages{az="az-a",client_id="r"}`
		followers = `azkafka_reader_follower_partitions{az="az-a",client_id="r"}`
		fallback  = `azkafka_reader_zone_fallback{az="az-a",client_id="r"}`
		messages  = `azkafka_reader_messages_total{az="az-a",client_id="r"}`
		idem      = `azkafka_writer_idempotent{az="az-a",client_id="w"}`
		bumps     = `azkafka_writer_epoch_bumps_total{az="az-a",client_id="w"}`
		info1     = `azkafka_client_info{az="az-a",az_source="env",client_id="r",kind="reader",session_id="s1"}`
	)
	check := func(when string, want map[string]float64) {
		t.Helper()
		got := values(t, reg)
		for series, v := range want {
			if got[series] != v {
				t.Errorf("%s: %s = %v, want %v", when, series, got[series], v)
			}
		}
	}
	check("open", map[string]float64{lag: 2 + 4, followers: 2, fallback: 1, messages: 24, idem: 1, bumps: 2, info1: 1})
	r1.Closed()
	w.ProducerID(-1, -1)
	check("one reader closed, the writer no longer idempotent", map[string]float64{lag: 4, followers: 1, fallback: 0, messages: 24, idem: 0, info1: 0})
	r2.Released("t", 0)
	r2.Closed()
	w.Closed()
	check("all closed", map[string]float64{lag: 0, followers: 0, idem: 0})
	if got := values(t, reg); len(slices.DeleteFunc(keys(got), func(k string) bool { return !strings.HasPrefix(k, "azkafka_client_info") })) != 0 {
		t.Errorf("client info left after every client closed: %v", got)
	}
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestConnectionsAndErrors: dials, closes by cause, re-dials, waits,
// errors absorbed, failures and resends land in their families.
func TestConnectionsAndErrors(t *testing.T) {
	col, reg := newRegistry(t)
	r := col.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a"})
	r.Dialed("b1:9092", true)
	r.Dialed("b1:9092", true)
	r.Dialed("b1:9092", false)
	r.ConnClosed("b1:9092", metrics.ClosePeer)
	r.DialWaited("b1:9092", metrics.WaitRedial, 30*time.Millisecond)
	r.DialWaited("b1:9092", metrics.WaitLimiter, 20*time.Millisecond)
	r.Absorbed("connection_closed")
	r.ProduceFailed("t", 0, 7, "delivery_timeout")
	r.Resent(metrics.ResendConnection)
	r.Resent(metrics.ResendStored)
	r.Requested(metrics.Broker{NodeID: 1, Addr: "b1:9092"}, 0, 100, 0, time.Second, "connection_closed")
	got := values(t, reg)
	for series, want := range map[string]float64{
		`azkafka_dials_total{az="az-a",broker="b1:9092",client_id="w",result="ok"}`:                                      2,
		`azkafka_dials_total{az="az-a",broker="b1:9092",client_id="w",result="error"}`:                                   1,
		`azkafka_connections_open{az="az-a",broker="b1:9092",client_id="w"}`:                                             1,
		`azkafka_connection_closes_total{az="az-a",broker="b1:9092",cause="peer",client_id="w"}`:                         1,
		`azkafka_connection_closes_total{az="az-a",broker="b1:9092",cause="peer_early",client_id="w"}`:                   0,
		`azkafka_redials_total{az="az-a",broker="b1:9092",client_id="w"}`:                                                1,
		`azkafka_dial_wait_seconds_total{az="az-a",client_id="w",reason="redial"}`:                                       0.03,
		`azkafka_dial_wait_seconds_total{az="az-a",client_id="w",reason="limiter"}`:                                      0.02,
		`azkafka_errors_absorbed_total{az="az-a",client_id="w",error="connection_closed"}`:                               1,
		`azkafka_writer_errors_total{az="az-a",client_id="w",error="delivery_timeout"}`:                                  7,
		`azkafka_writer_resends_total{az="az-a",cause="connection",client_id="w"}`:                                       1,
		`azkafka_writer_resends_total{az="az-a",cause="stored",client_id="w"}`:                                           1,
		`azkafka_request_errors_total{api="Produce",az="az-a",broker="b1:9092",client_id="w",error="connection_closed"}`: 1,
		`azkafka_broker_sent_bytes_total{az="az-a",broker="b1:9092",client_id="w",in_zone="unknown",rack=""}`:            100,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}

// TestTopicLabels: with WithTopicLabels the message families carry the
// topic, iq's the store; without, neither appears.
func TestTopicLabels(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			var opts []azprom.Option
			if on {
				opts = append(opts, azprom.WithTopicLabels())
			}
			col, reg := newRegistry(t, opts...)
			w := col.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a"})
			b := metrics.Broker{NodeID: 1, Addr: "b1:9092"}
			w.Produced(b, "orders", 0, 10, 100, 50)
			w.Produced(b, "payments", 1, 5, 50, 25)
			q := col.Recorder(metrics.Client{Kind: metrics.KindIQ, AZ: "az-a"})
			q.Queried("counts", metrics.QueryOK, metrics.CopyActive, 1, time.Millisecond)
			got := values(t, reg)
			var want map[string]float64
			if on {
				want = map[string]float64{
					`azkafka_writer_messages_total{az="az-a",client_id="w",topic="orders"}`:         10,
					`azkafka_writer_messages_total{az="az-a",client_id="w",topic="payments"}`:       5,
					`azkafka_iq_queries_total{az="az-a",copy="active",outcome="ok",store="counts"}`: 1,
					`azkafka_iq_query_attempts_total{az="az-a",store="counts"}`:                     1,
					`azkafka_iq_query_duration_seconds_count{az="az-a",outcome="ok"}`:               1,
				}
			} else {
				want = map[string]float64{
					`azkafka_writer_messages_total{az="az-a",client_id="w"}`:          15,
					`azkafka_iq_queries_total{az="az-a",copy="active",outcome="ok"}`:  1,
					`azkafka_iq_query_duration_seconds_count{az="az-a",outcome="ok"}`: 1,
				}
			}
			for series, v := range want {
				if got[series] != v {
					t.Errorf("%s = %v, want %v", series, got[series], v)
				}
			}
			for series := range got {
				if !on && (strings.Contains(series, "topic=") || strings.Contains(series, "store=")) {
					t.Errorf("%s without WithTopicLabels", series)
				}
			}
		})
	}
}

// TestHotPathAllocatesNothing: the events a client sends per request,
// batch and poll allocate nothing once their series exist.
func TestHotPathAllocatesNothing(t *testing.T) {
	metricstest.HotPathAllocations(t, azprom.New())
	metricstest.HotPathAllocations(t, azprom.New(azprom.WithTopicLabels()))
}

// TestTransactions: a TxnWriter's transactions on the embedded broker, by
// outcome, with their durations.
func TestTransactions(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("payments", 1))
	col, reg := newRegistry(t)
	w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "payments"},
		append(clientOptions(col, "billing"), sdk.WithTransactionalID("billing-0"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, commit := range []bool{true, false, true} {
		if err := w.Begin(); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "p%d", i)}); err != nil {
			t.Fatal(err)
		}
		end := w.Abort
		if commit {
			end = w.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	got := values(t, reg)
	for series, want := range map[string]float64{
		`azkafka_transactions_begun_total{az="az-a",client_id="billing"}`:               4,
		`azkafka_transactions_total{az="az-a",client_id="billing",outcome="committed"}`: 2,
		`azkafka_transactions_total{az="az-a",client_id="billing",outcome="abort"}`:     1,
		`azkafka_transaction_duration_seconds_count{az="az-a",client_id="billing"}`:     3,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}
