package azprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	azprom "github.com/azkafka/azkafka/contrib/prometheus"
	"github.com/azkafka/azkafka/internal/overhead"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkOverhead compares a Writer and a Reader without metrics with
// the same clients exporting to a registered Collector. Compare with
// benchstat:
//
//	go test -run '^$' -bench BenchmarkOverhead -benchmem -count 6 . > /tmp/prom-bench.txt
//	GOFLAGS= go run golang.org/x/perf/cmd/benchstat@latest -col '/metrics@(none prometheus)' /tmp/prom-bench.txt
func BenchmarkOverhead(b *testing.B) {
	c := azprom.New()
	prometheus.NewRegistry().MustRegister(c)
	overhead.Run(b,
		overhead.Variant{Name: "none"},
		overhead.Variant{Name: "prometheus", Options: func() []sdk.Option { return []sdk.Option{sdk.WithMetrics(c)} }},
	)
}

// BenchmarkRecorderEvents measures the Collector's share of one produce
// request of 100 messages in 6 batches (Requested, 6 Produced) and of one
// fetched batch of 100 messages handed out by one poll (Fetched,
// Consumed), without a broker's noise; divide by 100 for the cost per
// message.
func BenchmarkRecorderEvents(b *testing.B) {
	c := azprom.New()
	w := c.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a"})
	r := c.Recorder(metrics.Client{Kind: metrics.KindReader, UserID: "r", AZ: "az-a"})
	br := metrics.Broker{NodeID: 1, Addr: "127.0.0.1:9092", Rack: "az-a", InZone: true}
	b.Run("request=produce", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Requested(br, 0, 11_000, 300, 100*time.Microsecond, "")
			for p := range int32(6) {
				w.Produced(br, "t", p, 17, 2000, 2000)
			}
		}
	})
	b.Run("request=fetch-batch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Fetched(br, "t", 0, 100, 12_000, 12_000)
			r.Consumed("t", 0, 100, 10_000, 0)
		}
	})
}
