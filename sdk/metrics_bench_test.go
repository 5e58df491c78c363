package sdk_test

import (
	"testing"

	"github.com/azkafka/azkafka/internal/testkit/overhead"
	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkMetricsOverhead compares a Writer and a Reader without metrics
// with the same clients reporting every event to a Recorder that does
// nothing (metrics.Nop): what the hooks themselves cost. The exporters'
// modules run the same comparison with their Recorders
// (contrib/prometheus, contrib/otel). Compare with benchstat:
//
//	go test -run '^$' -bench BenchmarkMetricsOverhead -benchmem -count 6 ./sdk > /tmp/metrics-bench.txt
//	GOFLAGS= go run golang.org/x/perf/cmd/benchstat@latest -col '/metrics@(none nop)' /tmp/metrics-bench.txt
func BenchmarkMetricsOverhead(b *testing.B) {
	nop := metrics.ProviderFunc(func(metrics.Client) metrics.Recorder { return metrics.Nop{} })
	overhead.Run(b,
		overhead.Variant{Name: "none"},
		overhead.Variant{Name: "nop", Options: func() []sdk.Option { return []sdk.Option{sdk.WithMetrics(nop)} }},
	)
}
