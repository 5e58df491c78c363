package sdk_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/writebench"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkWriter compares, on the same embedded broker and in the same
// run, a raw kafka.Writer, sdk.Writer with idempotence off, the
// idempotent sdk.Writer, and franz-go's kgo producer used directly
// (idempotent by default), all with acks=all on a topic of 6 partitions
// (sdk-idempotent-unguarded: with the frame guard off, to measure its
// cost; sdk-idempotent-ungathered: without the gathering of synchronous
// calls, see the Writer's doc)
// and 100-byte values (franz-go-uncompressed: franz-go without its
// default snappy compression, sending the bytes the others send, which
// the in-process broker, in the same CPU budget, then copies):
//
//   - sync-100: one synchronous call of 100 messages at a time;
//     sync-100-acks1 and sync-100-acks0 the same with RequireOne and
//     RequireNone (franz-go's idempotence off, as it needs acks=all);
//   - sync-10-default-timeout: calls of 10 messages with kafka-go's
//     default BatchTimeout (1s), which a raw kafka.Writer waits out on
//     every call because its partition batches never fill;
//   - pipelined-4x500: 4 goroutines, each making calls of 500 messages;
//   - concurrent-12x4: 12 goroutines, each making calls of 4 messages;
//   - service-16x1, service-64x1, service-256x1, service-12x4: the
//     web-service pattern, many goroutines each making synchronous calls
//     of 1 (or 4) keyed 200-byte messages (kafka.Hash, a new key each
//     call), on a topic of 12 partitions; raw kafka-go with BatchTimeout
//     1ms, and with its default (raw-default-timeout);
//   - pinned-12x4: 12 goroutines, each making calls of 4 200-byte
//     messages to a partition of its own (of 12), one after another;
//     sdk-idempotent-unheld without the hold for returning callers (see
//     the Writer's doc).
//
// BatchTimeout is 10ms (5ms for concurrent-12x4, 1ms for the service
// cases) outside the default-timeout ones. It reports msgs/s, allocs/msg
// and each call's p50 and p99 in milliseconds; allocations and CPU
// include the in-process broker's, the same on every side. Compare with
// benchstat:
//
//	go test -run '^$' -bench BenchmarkWriter -benchmem -count 6 ./sdk > bench.txt
//	benchstat -col /client bench.txt
func BenchmarkWriter(b *testing.B) {
	c := embedded.StartT(b, embedded.Topic("bench", 6), embedded.Topic("service", 12))
	for _, sc := range []struct {
		name                string
		goroutines, perCall int
		batchTimeout        time.Duration
		service             bool // keyed 200-byte messages, 12 partitions
		acks                kafka.RequiredAcks
		keys                writebench.Keys // for service: Spread (kafka.Hash) or Pinned
	}{
		{"sync-100", 1, 100, 10 * time.Millisecond, false, 0, 0},
		{"sync-100-acks1", 1, 100, 10 * time.Millisecond, false, kafka.RequireOne, 0},
		{"sync-100-acks0", 1, 100, 10 * time.Millisecond, false, kafka.RequireNone, 0},
		{"sync-10-default-timeout", 1, 10, 0, false, 0, 0},
		{"pipelined-4x500", 4, 500, 10 * time.Millisecond, false, 0, 0},
		{"concurrent-12x4", 12, 4, 5 * time.Millisecond, false, 0, 0},
		{"service-16x1", 16, 1, time.Millisecond, true, 0, 0},
		{"service-64x1", 64, 1, time.Millisecond, true, 0, 0},
		{"service-256x1", 256, 1, time.Millisecond, true, 0, 0},
		{"service-12x4", 12, 4, time.Millisecond, true, 0, 0},
		{"pinned-12x4", 12, 4, time.Millisecond, true, 0, writebench.Pinned},
	} {
		topic, size, acks := "bench", 100, kafka.RequireAll
		if sc.acks != 0 {
			acks = sc.acks
		}
		var balancer kafka.Balancer
		var part []kgo.Opt
		keys := writebench.Same
		switch {
		case sc.keys == writebench.Pinned:
			topic, size, balancer, keys = "service", 200, writebench.PinnedBalancer, writebench.Pinned
			part = []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
		case sc.service:
			topic, size, balancer, keys = "service", 200, &kafka.Hash{}, writebench.Spread
		}
		kwWith := func(batchTimeout time.Duration) *kafka.Writer {
			return &kafka.Writer{
				Addr:         kafka.TCP(c.Addrs()...),
				Topic:        topic,
				Balancer:     balancer,
				RequiredAcks: acks,
				BatchTimeout: batchTimeout,
			}
		}
		kw := func() *kafka.Writer { return kwWith(sc.batchTimeout) }
		newSDK := func(b *testing.B, idempotent bool) writebench.Writer {
			w, err := sdk.NewWriter(kw(), sdk.WithAZ("az-a"), sdk.WithIdempotence(idempotent && acks == kafka.RequireAll),
				sdk.WithGetenv(func(string) string { return "" }), sdk.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			return w
		}
		clients := []struct {
			name string
			new  func(*testing.B) writebench.Writer
		}{
			{"raw", func(*testing.B) writebench.Writer { return kw() }},
			{"sdk-at-least-once", func(b *testing.B) writebench.Writer { return newSDK(b, false) }},
			{"sdk-idempotent", func(b *testing.B) writebench.Writer { return newSDK(b, true) }},
			{"sdk-idempotent-ungathered", func(b *testing.B) writebench.Writer {
				sdk.SetGather(false) // for this Writer
				defer sdk.SetGather(true)
				return newSDK(b, true)
			}},
			{"sdk-idempotent-unguarded", func(b *testing.B) writebench.Writer {
				sdk.SetFrameGuard(false) // for the connections of this Writer
				b.Cleanup(func() { sdk.SetFrameGuard(true) })
				return newSDK(b, true)
			}},
			{"franz-go", func(b *testing.B) writebench.Writer {
				return writebench.NewKgo(b, acks, append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(sc.batchTimeout)}, part...)...)
			}},
			{"franz-go-uncompressed", func(b *testing.B) writebench.Writer {
				return writebench.NewKgo(b, acks, append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(sc.batchTimeout),
					kgo.ProducerBatchCompression(kgo.NoCompression())}, part...)...)
			}},
		}
		if sc.service {
			clients = append(clients, struct {
				name string
				new  func(*testing.B) writebench.Writer
			}{"raw-default-timeout", func(*testing.B) writebench.Writer { return kwWith(0) }})
		}
		if keys == writebench.Pinned {
			clients = append(clients, struct {
				name string
				new  func(*testing.B) writebench.Writer
			}{"sdk-idempotent-unheld", func(b *testing.B) writebench.Writer {
				sdk.SetGatherHold(-1) // while this Writer runs
				b.Cleanup(func() { sdk.SetGatherHold(0) })
				return newSDK(b, true)
			}})
		}
		for _, cl := range clients {
			b.Run("case="+sc.name+"/client="+cl.name, func(b *testing.B) {
				writebench.Run(b, cl.new(b), sc.goroutines, sc.perCall, size, keys)
			})
		}
	}
}
