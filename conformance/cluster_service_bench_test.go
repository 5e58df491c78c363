//go:build conformance

package conformance

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/writebench"
	"github.com/azkafka/azkafka/sdk"
)

// serviceCases are the web-service pattern: many goroutines, each making
// synchronous calls of one (or four) keyed 200-byte messages, acks=all.
var serviceCases = []struct {
	name                string
	goroutines, perCall int
}{
	{"service-16x1", 16, 1},
	{"service-64x1", 64, 1},
	{"service-256x1", 256, 1},
	{"service-12x4", 12, 4},
}

// BenchmarkClusterService runs the web-service pattern on a 3-node Kafka
// 4.3.1 cluster of its own (a topic of 12 partitions, replication factor
// 3, min.insync.replicas 2, acks=all), side by side in one run: raw
// kafka.Writer (kafka.Hash, BatchTimeout 1 ms, and its default 1 s as
// raw-default-timeout), sdk.Writer with the same kafka.Writer (idempotent,
// its default at acks=all) and franz-go with its defaults (idempotent,
// ProduceSync). Each round starts a cluster; with -count 5 the clients
// alternate round by round:
//
//	CONFORMANCE_BENCH=BenchmarkClusterService CONFORMANCE_BENCH_COUNT=5 ./conformance/run.sh > bench.txt
//	benchstat -col /client -row /case bench.txt
func BenchmarkClusterService(b *testing.B) {
	c := startCluster(b, clusterConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "service"
	c.CreateTopic(ctx, topic, 12)
	addrs := c.Addrs()
	kw := func(batchTimeout time.Duration) *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, Balancer: &kafka.Hash{},
			RequiredAcks: kafka.RequireAll, BatchTimeout: batchTimeout}
	}
	clients := []struct {
		name string
		new  func(*testing.B) writebench.Writer
	}{
		{"raw", func(*testing.B) writebench.Writer { return kw(time.Millisecond) }},
		{"raw-default-timeout", func(*testing.B) writebench.Writer { return kw(0) }},
		{"sdk", func(b *testing.B) writebench.Writer {
			w, err := sdk.NewWriter(kw(time.Millisecond), sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }),
				sdk.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			return w
		}},
		{"franz-go", func(b *testing.B) writebench.Writer {
			return writebench.NewKgo(b, kafka.RequireAll, kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic))
		}},
	}
	for _, sc := range serviceCases {
		for _, cl := range clients {
			b.Run("case="+sc.name+"/client="+cl.name, func(b *testing.B) {
				writebench.Run(b, cl.new(b), sc.goroutines, sc.perCall, 200, true)
			})
		}
	}
}
