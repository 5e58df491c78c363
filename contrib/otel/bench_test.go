package azotel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	azotel "github.com/azkafka/azkafka/contrib/otel"
	"github.com/azkafka/azkafka/internal/overhead"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkOverhead compares a Writer and a Reader without metrics with
// the same clients exporting to the OpenTelemetry SDK's meter. Compare
// with benchstat:
//
//	go test -run '^$' -bench BenchmarkOverhead -benchmem -count 6 . > /tmp/otel-bench.txt
//	GOFLAGS= go run golang.org/x/perf/cmd/benchstat@latest -col '/metrics@(none otel)' /tmp/otel-bench.txt
func BenchmarkOverhead(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	m, err := azotel.NewMetrics(azotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	overhead.Run(b,
		overhead.Variant{Name: "none"},
		overhead.Variant{Name: "otel", Options: func() []sdk.Option { return []sdk.Option{sdk.WithMetrics(m)} }},
	)
}

// BenchmarkRecorderEvents measures the OpenTelemetry SDK meter's share of
// one produce request of 100 messages in 6 batches (Requested, 6
// Produced) and of one fetched batch of 100 messages handed out by one
// poll (Fetched, Consumed), without a broker's noise; divide by 100 for
// the cost per message.
func BenchmarkRecorderEvents(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	m, err := azotel.NewMetrics(azotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	w := m.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a"})
	r := m.Recorder(metrics.Client{Kind: metrics.KindReader, UserID: "r", AZ: "az-a"})
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
