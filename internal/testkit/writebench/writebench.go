// Package writebench measures Writers side by side: the same calls,
// spread over the same goroutines, through raw kafka-go, the SDK and
// franz-go, reporting msgs/s, allocations per message and each call's
// p50 and p99. sdk's BenchmarkWriter (the embedded broker) and the
// conformance suite's cluster benchmarks (Apache Kafka 4.3.1) use it.
package writebench

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
)

// Writer is what is measured: kafka.Writer, sdk.Writer, or Kgo.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
	Close() error
}

// Keys says which keys a benchmark's messages have.
type Keys int

const (
	// Same: every call writes the same keys.
	Same Keys = iota
	// Spread: each call's messages have keys of their own (each
	// goroutine cycles through 64 sets), as a web service's requests do.
	Spread
	// Pinned: goroutine g writes to partition g alone (its messages'
	// Partition, and their keys "pNN-..." for the Pinned balancer),
	// one call after another, as a consumer-per-partition pipeline does.
	Pinned
)

// PinnedBalancer puts a message of a Pinned run in its goroutine's
// partition, named by its key.
var PinnedBalancer = kafka.BalancerFunc(func(m kafka.Message, _ ...int) int {
	n, _ := strconv.Atoi(string(m.Key[1:3]))
	return n
})

// Run makes b.N calls of perCall messages of size-byte values through w,
// spread over goroutines, then closes w; keys says which keys they have.
// A first call before the timer connects and loads metadata.
//
// It reports msgs/s, allocs/msg (the whole process: with an in-process
// broker, its allocations too), cpu-ns/msg (the process's user and
// system time, GC included), each call's p50-ms and p99-ms, and for a
// Writer with kafka-go's Stats the messages a produce request carried
// (msgs/req).
func Run(b *testing.B, w Writer, goroutines, perCall, size int, keys Keys) {
	defer w.Close()
	const sets = 64
	msgs := make([][][]kafka.Message, goroutines)
	for g := range msgs {
		n := 1
		if keys == Spread {
			n = sets
		}
		for i := range n {
			ms := deliverytest.Messages(fmt.Sprintf("bench-%d-%d", g, i), perCall)
			for j := range ms {
				ms[j].Value = append(make([]byte, 0, size), ms[j].Value...)[:size]
				if keys == Pinned {
					ms[j].Key, ms[j].Partition = fmt.Appendf(nil, "p%02d-%d", g, j), g
				}
			}
			msgs[g] = append(msgs[g], ms)
		}
	}
	ctx := context.Background()
	if err := w.WriteMessages(ctx, msgs[0][0]...); err != nil {
		b.Fatal(err)
	}
	stats(w) // kafka-go's Stats reports what came since the last call
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := processCPU()
	took := make([]time.Duration, b.N)
	var n atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	msgsN := float64(b.N * perCall)
	b.ReportMetric(msgsN/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/msgsN, "allocs/msg")
	b.ReportMetric(float64(processCPU()-cpu0)/msgsN, "cpu-ns/msg")
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
	if s, ok := stats(w); ok && s.Writes > 0 {
		b.ReportMetric(float64(s.Messages)/float64(s.Writes), "msgs/req")
	}
}

// stats returns kafka-go's WriterStats of w, when w has them: a Stats
// method returning kafka.WriterStats (kafka.Writer) or a struct that
// embeds it (sdk.Writer, which this package cannot import). Run reports
// the messages a produce request carried on average.
func stats(w Writer) (kafka.WriterStats, bool) {
	m := reflect.ValueOf(w).MethodByName("Stats")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return kafka.WriterStats{}, false
	}
	v := m.Call(nil)[0]
	if s, ok := v.Interface().(kafka.WriterStats); ok {
		return s, true
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("WriterStats"); f.IsValid() {
			s, ok := f.Interface().(kafka.WriterStats)
			return s, ok
		}
	}
	return kafka.WriterStats{}, false
}

// processCPU is the CPU time this process used so far, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// Kgo is franz-go's client used directly: a call is one ProduceSync of
// its messages (keys, values, and partitions for a ManualPartitioner).
type Kgo struct{ Client *kgo.Client }

// NewKgo is a franz-go client with opts, for acks as kafka-go names them:
// RequireAll keeps franz-go's idempotent default, the others turn
// idempotence off (it needs acks=all).
func NewKgo(tb testing.TB, acks kafka.RequiredAcks, opts ...kgo.Opt) Kgo {
	switch acks {
	case kafka.RequireOne:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case kafka.RequireNone:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return Kgo{cl}
}

// WriteMessages produces msgs and waits for every one's outcome.
func (w Kgo) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	recs := make([]*kgo.Record, len(msgs))
	for i := range msgs {
		recs[i] = &kgo.Record{Key: msgs[i].Key, Value: msgs[i].Value, Partition: int32(msgs[i].Partition)}
	}
	return w.Client.ProduceSync(ctx, recs...).FirstErr()
}

// Close closes the client.
func (w Kgo) Close() error { w.Client.Close(); return nil }
