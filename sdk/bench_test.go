package sdk_test

import (
	"context"
	"runtime"
	"sync"
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
//   - sync-10-default-timeout: calls of 10 messages with kafka-go's
//     default BatchTimeout (1s), which a raw kafka.Writer waits out on
//     every call because its partition batches never fill;
//   - pipelined-4x500: 4 goroutines, each making calls of 500 messages;
//   - concurrent-12x4: 12 goroutines, each making calls of 4 messages.
//
// BatchTimeout is 10ms (5ms for concurrent-12x4) outside the
// default-timeout case. It reports
// msgs/s and allocs/msg; allocations and CPU include the in-process
// broker's, the same on every side. Compare with benchstat:
//
//	go test -run '^$' -bench BenchmarkWriter -benchmem -count 6 ./sdk > bench.txt
//	benchstat -col /client bench.txt
func BenchmarkWriter(b *testing.B) {
	c := embedded.StartT(b, embedded.Topic("bench", 6))
	for _, sc := range []struct {
		name                string
		goroutines, perCall int
		batchTimeout        time.Duration
	}{
		{"sync-100", 1, 100, 10 * time.Millisecond},
		{"sync-10-default-timeout", 1, 10, 0},
		{"pipelined-4x500", 4, 500, 10 * time.Millisecond},
		{"concurrent-12x4", 12, 4, 5 * time.Millisecond},
	} {
		kw := func() *kafka.Writer {
			return &kafka.Writer{
				Addr:         kafka.TCP(c.Addrs()...),
				Topic:        "bench",
				RequiredAcks: kafka.RequireAll,
				BatchTimeout: sc.batchTimeout,
			}
		}
		newSDK := func(b *testing.B, idempotent bool) writer {
			w, err := sdk.NewWriter(kw(), sdk.WithAZ("az-a"), sdk.WithIdempotence(idempotent), sdk.WithGetenv(func(string) string { return "" }))
			if err != nil {
				b.Fatal(err)
			}
			return w
		}
		for _, cl := range []struct {
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
			{"franz-go", func(b *testing.B) writer { return newKgoWriter(b, c.Addrs(), "bench", sc.batchTimeout) }},
		} {
			b.Run("case="+sc.name+"/client="+cl.name, func(b *testing.B) {
				benchWrites(b, cl.new(b), sc.goroutines, sc.perCall)
			})
		}
	}
}

type writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// benchWrites makes b.N calls of perCall messages, spread over goroutines.
func benchWrites(b *testing.B, w writer, goroutines, perCall int) {
	defer w.Close()
	msgs := deliverytest.Messages("bench", perCall)
	for i := range msgs {
		msgs[i].Value = append(make([]byte, 0, 100), msgs[i].Value...)
		msgs[i].Value = msgs[i].Value[:100] // 100-byte values
	}
	ctx := context.Background()
	if err := w.WriteMessages(ctx, msgs...); err != nil { // connect, fetch metadata
		b.Fatal(err)
	}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	var next sync.WaitGroup
	calls := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		calls <- struct{}{}
	}
	close(calls)
	for g := 0; g < goroutines; g++ {
		next.Add(1)
		go func() {
			defer next.Done()
			for range calls {
				if err := w.WriteMessages(ctx, msgs...); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	next.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.N*perCall)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*perCall), "allocs/msg")
}

// kgoWriter adapts franz-go's client to the writer interface: a call is
// one ProduceSync of its messages.
type kgoWriter struct{ cl *kgo.Client }

func newKgoWriter(b *testing.B, addrs []string, topic string, linger time.Duration) writer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(linger))
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
