package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkWriter compares, on the same embedded broker and in the same
// run, a raw kafka.Writer, sdk.Writer with idempotence off, the
// idempotent sdk.Writer, and franz-go's kgo producer used directly
// (idempotent by default), all with acks=all on a topic of 6 partitions
// (sdk-idempotent-unguarded: with the frame guard off, to measure its
// cost)
// and 100-byte values:
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
//     1ms, and with its default (raw-default-timeout).
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
		service             bool // keyed 200-byte messages, kafka.Hash, 12 partitions
		acks                kafka.RequiredAcks
	}{
		{"sync-100", 1, 100, 10 * time.Millisecond, false, 0},
		{"sync-100-acks1", 1, 100, 10 * time.Millisecond, false, kafka.RequireOne},
		{"sync-100-acks0", 1, 100, 10 * time.Millisecond, false, kafka.RequireNone},
		{"sync-10-default-timeout", 1, 10, 0, false, 0},
		{"pipelined-4x500", 4, 500, 10 * time.Millisecond, false, 0},
		{"concurrent-12x4", 12, 4, 5 * time.Millisecond, false, 0},
		{"service-16x1", 16, 1, time.Millisecond, true, 0},
		{"service-64x1", 64, 1, time.Millisecond, true, 0},
		{"service-256x1", 256, 1, time.Millisecond, true, 0},
		{"service-12x4", 12, 4, time.Millisecond, true, 0},
	} {
		topic, size, acks := "bench", 100, kafka.RequireAll
		if sc.acks != 0 {
			acks = sc.acks
		}
		var balancer kafka.Balancer
		if sc.service {
			topic, size, balancer = "service", 200, &kafka.Hash{}
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
		newSDK := func(b *testing.B, idempotent bool) writer {
			w, err := sdk.NewWriter(kw(), sdk.WithAZ("az-a"), sdk.WithIdempotence(idempotent && acks == kafka.RequireAll),
				sdk.WithGetenv(func(string) string { return "" }), sdk.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			return w
		}
		clients := []struct {
			name string
			new  func(*testing.B) writer
		}{
			{"raw", func(*testing.B) writer { return kw() }},
			{"sdk-at-least-once", func(b *testing.B) writer { return newSDK(b, false) }},
			{"sdk-idempotent", func(b *testing.B) writer { return newSDK(b, true) }},
			{"sdk-idempotent-unguarded", func(b *testing.B) writer {
				sdk.SetFrameGuard(false) // for the connections of this Writer
				b.Cleanup(func() { sdk.SetFrameGuard(true) })
				return newSDK(b, true)
			}},
			{"franz-go", func(b *testing.B) writer { return newKgoWriter(b, c.Addrs(), topic, sc.batchTimeout, acks) }},
		}
		if sc.service {
			clients = append(clients, struct {
				name string
				new  func(*testing.B) writer
			}{"raw-default-timeout", func(*testing.B) writer { return kwWith(0) }})
		}
		for _, cl := range clients {
			b.Run("case="+sc.name+"/client="+cl.name, func(b *testing.B) {
				benchWrites(b, cl.new(b), sc.goroutines, sc.perCall, size, sc.service)
			})
		}
	}
}

type writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// benchWrites makes b.N calls of perCall messages of size-byte values,
// spread over goroutines; with keyed, each call's messages have keys of
// their own (each goroutine cycles through 64 sets).
func benchWrites(b *testing.B, w writer, goroutines, perCall, size int, keyed bool) {
	defer w.Close()
	const sets = 64
	msgs := make([][][]kafka.Message, goroutines)
	for g := range msgs {
		n := 1
		if keyed {
			n = sets
		}
		for i := range n {
			ms := deliverytest.Messages(fmt.Sprintf("bench-%d-%d", g, i), perCall)
			for j := range ms {
				ms[j].Value = append(make([]byte, 0, size), ms[j].Value...)[:size]
			}
			msgs[g] = append(msgs[g], ms)
		}
	}
	ctx := context.Background()
	if err := w.WriteMessages(ctx, msgs[0][0]...); err != nil { // connect, fetch metadata
		b.Fatal(err)
	}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	took := make([]time.Duration, b.N)
	var n atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var next sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		next.Add(1)
		go func() {
			defer next.Done()
			for k := 0; ; k++ {
				i := n.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := w.WriteMessages(ctx, msgs[g][k%len(msgs[g])]...); err != nil {
					b.Error(err)
					return
				}
				took[i] = time.Since(t0)
			}
		}()
	}
	next.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(b.N*perCall)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*perCall), "allocs/msg")
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
}

// kgoWriter adapts franz-go's client to the writer interface: a call is
// one ProduceSync of its messages.
type kgoWriter struct{ cl *kgo.Client }

func newKgoWriter(b *testing.B, addrs []string, topic string, linger time.Duration, acks kafka.RequiredAcks) writer {
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(linger)}
	switch acks {
	case kafka.RequireOne:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case kafka.RequireNone:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return kgoWriter{cl}
}

func (w kgoWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	recs := make([]*kgo.Record, len(msgs))
	for i := range msgs {
		recs[i] = &kgo.Record{Key: msgs[i].Key, Value: msgs[i].Value}
	}
	return w.cl.ProduceSync(ctx, recs...).FirstErr()
}

func (w kgoWriter) Close() error { w.cl.Close(); return nil }
