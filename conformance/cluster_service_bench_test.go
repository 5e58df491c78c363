//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/writebench"
	"github.com/azkafka/azkafka/sdk"
)

// serviceCases are the web-service pattern: many goroutines, each making
// synchronous calls of one (or four) keyed 200-byte messages, acks=all;
// and pinned-12x4, a goroutine per partition making calls of four, one
// after another (TestClusterFailover's producers).
var serviceCases = []struct {
	name                string
	goroutines, perCall int
	keys                writebench.Keys
}{
	{"service-16x1", 16, 1, writebench.Spread},
	{"service-64x1", 64, 1, writebench.Spread},
	{"service-256x1", 256, 1, writebench.Spread},
	{"service-12x4", 12, 4, writebench.Spread},
	{"pinned-12x4", 12, 4, writebench.Pinned},
}

// BenchmarkClusterService runs the web-service pattern on a 3-node Kafka
// 4.3.1 cluster of its own (a topic of 12 partitions, replication factor
// 3, min.insync.replicas 2), side by side in one run: see benchService.
//
//	CONFORMANCE_BENCH=BenchmarkClusterService CONFORMANCE_BENCH_COUNT=5 ./conformance/run.sh > bench.txt
//	benchstat -col /client -row /case bench.txt
func BenchmarkClusterService(b *testing.B) {
	c := startCluster(b, clusterConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "service"
	c.CreateTopic(ctx, topic, 12)
	benchService(b, c.Addrs(), topic)
}

// BenchmarkBrokerService is BenchmarkClusterService on run.sh's one
// broker (a topic of 12 partitions, not replicated).
func BenchmarkBrokerService(b *testing.B) {
	addrs := brokers(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-service-%d", time.Now().UnixNano())
	createTopic(b, ctx, addrs, topic, 12)
	benchService(b, addrs, topic)
}

// benchService runs serviceCases at acks=all through raw kafka.Writer
// (kafka.Hash, BatchTimeout 1 ms, and its default 1 s as
// raw-default-timeout), sdk.Writer made from the same kafka.Writer
// (idempotent, its default at acks=all) and franz-go with its defaults
// (idempotent, ProduceSync, keys hashed with murmur2). In pinned-12x4
// every client puts each goroutine's messages in its own partition.
func benchService(b *testing.B, addrs []string, topic string) {
	for _, sc := range serviceCases {
		var balancer kafka.Balancer = &kafka.Hash{}
		var part []kgo.Opt
		if sc.keys == writebench.Pinned {
			balancer, part = writebench.PinnedBalancer, []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
		}
		for _, cl := range serviceClients(addrs, topic, balancer, part) {
			b.Run("case="+sc.name+"/client="+cl.name, func(b *testing.B) {
				writebench.Run(b, cl.new(b), sc.goroutines, sc.perCall, 200, sc.keys)
			})
		}
	}
}

// serviceClients are benchService's clients.
func serviceClients(addrs []string, topic string, balancer kafka.Balancer, part []kgo.Opt) []struct {
	name string
	new  func(*testing.B) writebench.Writer
} {
	kw := func(batchTimeout time.Duration) *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, Balancer: balancer,
			RequiredAcks: kafka.RequireAll, BatchTimeout: batchTimeout}
	}
	return []struct {
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
			return writebench.NewKgo(b, kafka.RequireAll, append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic)}, part...)...)
		}},
	}
}
