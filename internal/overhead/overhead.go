// Package overhead measures what options cost an sdk.Writer's and an
// sdk.Reader's throughput on the embedded broker, side by side in one
// run, for the benchmarks of the metrics hooks and their exporters:
//
//	func BenchmarkOverhead(b *testing.B) {
//		overhead.Run(b, overhead.Variant{Name: "none"}, overhead.Variant{Name: "nop", Options: ...})
//	}
//
// Each variant gets its own Writer and Readers on the same broker. Compare
// the variants with benchstat (-col /metrics); -count repeats the whole
// benchmark, so the variants' runs interleave.
package overhead

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// Variant is one configuration of the clients.
type Variant struct {
	// Name is the value of the metrics= part of the sub-benchmarks' names.
	Name string
	// Options returns the options added to every client of the variant.
	Options func() []sdk.Option
}

const (
	perCall    = 100    // messages per WriteMessages
	valueBytes = 100    // bytes per message value
	readN      = 20_000 // messages each Reader iteration reads
)

// Run measures every variant: client=writer, synchronous calls of 100
// messages of 100 bytes (op: one call) with acks=all and idempotence, on
// a topic of 6 partitions; client=reader, a Reader of one partition
// reading 20,000 such messages from the start (op: the Reader's creation,
// its reads, its Close). Both report msgs/s, allocs/msg and cpu-ns/msg
// (the whole process's: the in-process broker's included).
func Run(b *testing.B, variants ...Variant) {
	c := embedded.StartT(b, embedded.Topic("overhead-w", 6), embedded.Topic("overhead-r", 1))
	fill(b, c.Addrs(), "overhead-r")
	base := []sdk.Option{
		sdk.WithAZ("az-a"),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithMaxConnRate(0, 1),
	}
	opts := func(v Variant) []sdk.Option {
		o := append([]sdk.Option(nil), base...)
		if v.Options != nil {
			o = append(o, v.Options()...)
		}
		return o
	}
	// Warm the broker and the process up, untimed, and rotate the order
	// of the variants from one run (-count) to the next: none is favoured
	// by going first into a fresh broker.
	warm(b, c.Addrs(), base)
	k := int(runs.Add(1))
	order := append(variants[k%len(variants):], variants[:k%len(variants)]...)
	for _, v := range order {
		b.Run("client=writer/metrics="+v.Name, func(b *testing.B) { writes(b, c.Addrs(), opts(v)) })
	}
	for _, v := range order {
		b.Run("client=reader/metrics="+v.Name, func(b *testing.B) { reads(b, c.Addrs(), opts(v)) })
	}
}

// runs counts the calls of Run, topics the Writers' topics.
var runs, topics atomic.Int64

// warm writes a few hundred calls' worth and reads the read topic once.
func warm(b *testing.B, addrs []string, opts []sdk.Option) {
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addrs...), Topic: "overhead-w", RequiredAcks: kafka.RequireAll}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	msgs := messages()
	for range 300 {
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: "overhead-r", MaxWait: 100 * time.Millisecond}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for range readN {
		if _, err := r.FetchMessage(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func messages() []kafka.Message {
	msgs := make([]kafka.Message, perCall)
	for i := range msgs {
		msgs[i].Value = make([]byte, valueBytes)
	}
	return msgs
}

func fill(b *testing.B, addrs []string, topic string) {
	b.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: time.Millisecond}
	defer w.Close()
	msgs := messages()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range readN / perCall {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	}
}

// writes measures a Writer on a topic of its own, deleted after, so that
// what earlier runs stored does not weigh on the garbage collector.
func writes(b *testing.B, addrs []string, opts []sdk.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("overhead-w-%d", topics.Add(1))
	if err := embedded.CreateTopic(ctx, addrs, topic, 6); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if _, err := (&kafka.Client{Addr: kafka.TCP(addrs...)}).DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}}); err != nil {
			b.Fatal(err)
		}
	}()
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, RequiredAcks: kafka.RequireAll}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	msgs := messages()
	if err := w.WriteMessages(ctx, msgs...); err != nil { // connect, metadata, producer ID
		b.Fatal(err)
	}
	measure(b, perCall, func() {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	})
}

func reads(b *testing.B, addrs []string, opts []sdk.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	measure(b, readN, func() {
		r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: "overhead-r", MaxWait: 100 * time.Millisecond}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		for range readN {
			if _, err := r.FetchMessage(ctx); err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
	})
}

// measure runs op b.N times and reports msgs/s, allocs/msg and
// cpu-ns/msg (the process's CPU time, user and system, which other load on
// the machine disturbs less than the wall clock), msgs being the messages
// of one op. The garbage of what ran before is collected first.
func measure(b *testing.B, msgs int, op func()) {
	b.ReportAllocs()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		op()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&after)
	n := float64(b.N * msgs)
	b.ReportMetric(n/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/msg")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/msg")
	}
}
