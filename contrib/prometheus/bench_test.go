package azprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	azprom "github.com/azkafka/azkafka/contrib/prometheus"
	"github.com/azkafka/azkafka/internal/testkit/overhead"
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
// request and of one fetched batch, 100 messages each (see
// overhead.Events).
func BenchmarkRecorderEvents(b *testing.B) { overhead.Events(b, azprom.New()) }
