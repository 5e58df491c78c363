package sdk_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/deliverytest"
	"github.com/azkafka/azkafka/internal/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// BenchmarkWriter compares sdk.Writer with a raw kafka.Writer on the same
// embedded broker, in the same run: each op is one synchronous
// WriteMessages of 100 messages (one full batch, acks=all). It reports
// msgs/s and allocs/msg; allocations include the in-process broker's,
// which are the same on both sides. Compare with benchstat:
//
//	go test -run '^$' -bench BenchmarkWriter -benchmem -count 6 ./sdk > bench.txt
func BenchmarkWriter(b *testing.B) {
	c := embedded.StartT(b, embedded.Topic("bench", 1))
	newRaw := func(b *testing.B) writer {
		return benchKafkaWriter(c.Addrs())
	}
	newSDK := func(b *testing.B) writer {
		w, err := sdk.NewWriter(benchKafkaWriter(c.Addrs()), sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }))
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	for _, bc := range []struct {
		name string
		new  func(*testing.B) writer
	}{{"raw", newRaw}, {"sdk", newSDK}} {
		b.Run(bc.name, func(b *testing.B) { benchWrites(b, bc.new(b)) })
	}
}

type writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

func benchKafkaWriter(addrs []string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        "bench",
		RequiredAcks: kafka.RequireAll,
		BatchSize:    100,
		BatchTimeout: 50 * time.Millisecond, // never reached: every call fills a batch
	}
}

func benchWrites(b *testing.B, w writer) {
	defer w.Close()
	const perOp = 100
	msgs := deliverytest.Messages("bench", perOp)
	ctx := context.Background()
	if err := w.WriteMessages(ctx, msgs...); err != nil { // connect, fetch metadata
		b.Fatal(err)
	}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.N*perOp)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*perOp), "allocs/msg")
}
