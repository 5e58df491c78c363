// Package overhead measures what options cost an sdk.Writer's and an
// sdk.Reader's throughput on the embedded broker, side by side in one
// run, for the benchmarks of the metrics hooks and their exporters:
//
//	func BenchmarkOverhead(b *testing.B) {
//		overhead.Run(b, overhead.Variant{Name: "none"}, overhead.Variant{Name: "nop", Options: ...})
//	}
//
// Each variant gets its own Writer and Readers on the same broker, measured
// in a sub-benchmark of its own (metrics=<name>), and all variants are
// measured once more in one sub-benchmark (metrics=paired) that alternates
// between them call by call, so that the machine's other load falls on
// every variant alike; it reports each variant's time beyond the first's
// in percent (<name>-%). Compare with benchstat: -col /metrics.
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

	"github.com/azkafka/azkafka/internal/testkit/embedded"
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
	readN      = 20_000 // messages each Reader reads
	readTopic  = "overhead-r"
)

// Run measures every variant: client=writer, synchronous calls of 100
// messages of 100 bytes (op: one call) with acks=all and idempotence, on
// a topic of 6 partitions; client=reader, a Reader of one partition
// reading 20,000 such messages from the start (op: the Reader's creation,
// its reads, its Close). Both report msgs/s, allocs/msg and cpu-ns/msg
// (the whole process's: the in-process broker's included). The first
// variant is the base of the paired sub-benchmarks.
func Run(b *testing.B, variants ...Variant) {
	c := embedded.StartT(b, embedded.Topic(readTopic, 1))
	addrs := c.Addrs()
	fill(b, addrs)
	base := []sdk.Option{
		sdk.WithAZ("az-a"),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithMaxConnRate(0, 1),
	}
	opts := make([][]sdk.Option, len(variants))
	for i, v := range variants {
		opts[i] = append([]sdk.Option(nil), base...)
		if v.Options != nil {
			opts[i] = append(opts[i], v.Options()...)
		}
	}
	// Warm the broker and the process up, untimed.
	withWriter(b, addrs, base, func(w *sdk.Writer) {
		for range 300 {
			write(b, w)
		}
	})
	read(b, addrs, base)

	for i, v := range variants {
		b.Run("client=writer/metrics="+v.Name, func(b *testing.B) {
			withWriter(b, addrs, opts[i], func(w *sdk.Writer) {
				measure(b, perCall, func() { write(b, w) })
			})
		})
	}
	if len(variants) > 1 {
		b.Run("client=writer/metrics=paired", func(b *testing.B) { pairedWrites(b, addrs, variants, opts) })
	}
	for i, v := range variants {
		b.Run("client=reader/metrics="+v.Name, func(b *testing.B) {
			measure(b, readN, func() { read(b, addrs, opts[i]) })
		})
	}
	if len(variants) > 1 {
		b.Run("client=reader/metrics=paired", func(b *testing.B) {
			paired(b, variants, func(i int) { read(b, addrs, opts[i]) })
		})
	}
}

// topics counts the Writers' topics.
var topics atomic.Int64

func messages() []kafka.Message {
	msgs := make([]kafka.Message, perCall)
	for i := range msgs {
		msgs[i].Value = make([]byte, valueBytes)
	}
	return msgs
}

var batch = messages()

// fill writes readN messages, in batches of perCall, to the read topic.
func fill(b *testing.B, addrs []string) {
	b.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: readTopic, RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: time.Millisecond}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range readN / perCall {
		if err := w.WriteMessages(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
}

// withWriter runs f with a connected Writer on a topic of its own,
// deleted after, so that what earlier runs stored does not weigh on the
// garbage collector.
func withWriter(b *testing.B, addrs []string, opts []sdk.Option, f func(*sdk.Writer)) {
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
	write(b, w) // connect, metadata, producer ID
	f(w)
}

func write(b *testing.B, w *sdk.Writer) {
	if err := w.WriteMessages(context.Background(), batch...); err != nil {
		b.Fatal(err)
	}
}

// read creates a Reader, reads readN messages with it and closes it.
func read(b *testing.B, addrs []string, opts []sdk.Option) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: readTopic, MaxWait: 100 * time.Millisecond}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	for range readN {
		if _, err := r.FetchMessage(ctx); err != nil {
			b.Fatal(err)
		}
	}
	r.Close()
}

// pairedWrites is paired with a Writer per variant.
func pairedWrites(b *testing.B, addrs []string, variants []Variant, opts [][]sdk.Option) {
	ws := make([]*sdk.Writer, len(variants))
	var open func(i int)
	open = func(i int) {
		if i == len(variants) {
			paired(b, variants, func(i int) { write(b, ws[i]) })
			return
		}
		withWriter(b, addrs, opts[i], func(w *sdk.Writer) { ws[i] = w; open(i + 1) })
	}
	open(0)
}

// paired runs op for each variant b.N times, the variants alternating in
// a rotating order, and reports the time each variant's ops took beyond
// the first variant's, in percent.
func paired(b *testing.B, variants []Variant, op func(variant int)) {
	spent := make([]time.Duration, len(variants))
	runtime.GC()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for k := range variants {
			i := (n + k) % len(variants)
			start := time.Now()
			op(i)
			spent[i] += time.Since(start)
		}
	}
	b.StopTimer()
	for i := 1; i < len(variants); i++ {
		b.ReportMetric(100*(float64(spent[i])/float64(spent[0])-1), variants[i].Name+"-%")
	}
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
