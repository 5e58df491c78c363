package azotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	azotel "github.com/azkafka/azkafka/contrib/otel"
	"github.com/azkafka/azkafka/internal/testkit/overhead"
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
// one produce request and of one fetched batch, 100 messages each (see
// overhead.Events).
func BenchmarkRecorderEvents(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	m, err := azotel.NewMetrics(azotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	overhead.Events(b, m)
}
