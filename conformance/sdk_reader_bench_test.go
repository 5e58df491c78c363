//go:build conformance

package conformance

// Consumer throughput on the real broker: sdk.Reader next to kafka-go's
// kafka.Reader and franz-go's kgo group consumer, each reading the whole
// of a pre-filled topic with a fresh consumer group per iteration.
//
//	CONFORMANCE_BENCH=BenchmarkReader CONFORMANCE_BENCH_COUNT=5 ./conformance/run.sh > /tmp/bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /engine /tmp/bench.txt
//
// AZKAFKA_CONFORMANCE_BENCH_MESSAGES sets the topic's size (default
// 1,200,000 keyed messages of 100 bytes on 6 partitions); a quick run
// can use fewer.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/sdk"
)

const (
	readerBenchPartitions = 6
	readerBenchValueSize  = 100
	// readerBenchMaxWait is every engine's fetch wait (kafka-go's default
	// of 10 s would only show in Close, when a fetch is parked on the
	// broker).
	readerBenchMaxWait = 500 * time.Millisecond
)

// benchInput is a pre-filled topic the benchmarks of a test binary read:
// filled once, on first use.
type benchInput struct {
	once  sync.Once
	addrs []string
	name  string
	ends  []int64 // end offset of each partition
	total int
	err   error
}

// readerBenchTopic is the topic every reader benchmark reads.
var readerBenchTopic benchInput

func readerBenchMessages(tb testing.TB) int {
	v := os.Getenv("AZKAFKA_CONFORMANCE_BENCH_MESSAGES")
	if v == "" {
		return 1200000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < readerBenchPartitions {
		tb.Fatalf("AZKAFKA_CONFORMANCE_BENCH_MESSAGES=%q: want a whole number of messages, at least %d", v, readerBenchPartitions)
	}
	return n
}

// readerBenchFill returns the topic, filling it on the first call: keys
// key-<index> (spread over the partitions by murmur2, as kafka-go's and
// Java's key hashing would), 100-byte values.
func readerBenchFill(b *testing.B) (addrs []string, topic string, ends []int64, total int) {
	b.Helper()
	return readerBenchTopic.fill(b, "reader benchmark topic", "azkafka-reader-bench", readerBenchMessages, readerBenchPartitions,
		func(i int) *kgo.Record {
			v := make([]byte, readerBenchValueSize)
			copy(v, fmt.Sprintf("value-%09d-", i))
			for j := 16; j < len(v); j++ {
				v[j] = byte('a' + (i+j)%26)
			}
			return &kgo.Record{Key: fmt.Appendf(nil, "key-%09d", i), Value: v}
		}, nil)
}

// fill returns the topic, filling it on the first call with franz-go's
// producer, uncompressed: messages(b) records record(i) on parts
// partitions; then it readies the group coordinator, runs ready (if not
// nil) and reads the whole topic once, so that no measured read runs on a
// cold broker (JIT, page cache) and slows whichever engine comes first.
// what names the topic in logs and errors, prefix begins its name.
func (in *benchInput) fill(b *testing.B, what, prefix string, messages func(testing.TB) int, parts int,
	record func(i int) *kgo.Record, ready func(ctx context.Context, addrs []string) error) (addrs []string, topic string, ends []int64, total int) {
	b.Helper()
	in.once.Do(func() {
		in.addrs = brokers(b)
		n := messages(b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		in.name = fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
		createTopic(b, ctx, in.addrs, in.name, parts)
		cl, err := kgo.NewClient(kgo.SeedBrokers(in.addrs...), kgo.DefaultProduceTopic(in.name),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			in.err = err
			return
		}
		defer cl.Close()
		start := time.Now()
		var once sync.Once
		var produceErr error
		for i := range n {
			cl.Produce(ctx, record(i), func(_ *kgo.Record, err error) {
				if err != nil {
					once.Do(func() { produceErr = err })
				}
			})
		}
		if err := cl.Flush(ctx); err != nil || produceErr != nil {
			in.err = errors.Join(err, produceErr)
			return
		}
		if in.err = waitGroupCoordinator(ctx, in.addrs[0]); in.err != nil {
			return
		}
		if ready != nil {
			if in.err = ready(ctx, in.addrs); in.err != nil {
				return
			}
		}
		in.ends = make([]int64, parts)
		for p, end := range deliverytest.EndOffsets(ctx, b, deliverytest.Topic{Addrs: in.addrs, Name: in.name, Partitions: parts}) {
			in.ends[p] = end
			in.total += int(end)
		}
		if in.err = readerBenchWarmUp(ctx, in.addrs, in.name, in.ends); in.err != nil {
			return
		}
		b.Logf("%s %s: %d messages on %d partitions, produced in %v", what, in.name, in.total, parts, time.Since(start).Round(time.Millisecond))
	})
	if in.err != nil {
		b.Fatalf("filling the %s: %v", what, in.err)
	}
	if in.total == 0 {
		b.Fatalf("the %s is empty", what)
	}
	return in.addrs, in.name, in.ends, in.total
}

// readerBenchWarmUp reads the whole topic once with franz-go, without a
// group.
func readerBenchWarmUp(ctx context.Context, addrs []string, topic string, ends []int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	prog := newReaderBenchProgress(ends)
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			return fmt.Errorf("warm-up read after %d messages: %w", prog.read, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { done = prog.saw(int(r.Partition), r.Offset) || done })
	}
	return nil
}

// readerBenchProgress tells when a reader has read every partition to its
// end offset.
type readerBenchProgress struct {
	ends, next []int64
	left       int // partitions not read to the end
	read       int
	// limit, when not 0, ends the read after that many messages.
	limit int
	// commits and committing count the synchronous CommitMessages calls
	// and the time spent in them.
	commits    int
	committing time.Duration
}

func newReaderBenchProgress(ends []int64) *readerBenchProgress {
	p := &readerBenchProgress{ends: ends, next: make([]int64, len(ends))}
	for _, e := range ends {
		if e > 0 {
			p.left++
		}
	}
	return p
}

// saw records the message at offset of partition and reports whether
// every partition has now been read to its end.
func (p *readerBenchProgress) saw(partition int, offset int64) bool {
	p.read++
	if offset+1 > p.next[partition] {
		if offset+1 == p.ends[partition] {
			p.left--
		}
		p.next[partition] = offset + 1
	}
	return p.left == 0 || p.limit > 0 && p.read >= p.limit
}

// readerBenchIter is one iteration: read the whole topic with a fresh
// group and return when the first message arrived and how to close the
// reader.
type readerBenchIter func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (firstAt time.Time, close func() error)

// readerBenchRun runs iter b.N times and reports msgs/s (messages read
// over the time from creating the reader to the last message, Close
// excluded), allocs/msg (over the same span), close-ms (mean Close),
// first-msg-ms (mean time from creating the reader to its first message:
// the group join and first fetch) and, with synchronous commits,
// commit-us (mean CommitMessages call); cpu-ns/msg is the process's CPU
// (user and system, the engine's goroutines and the garbage collector
// included) over the reading span per message, steadier than msgs/s on a
// machine whose cores the broker shares.
func readerBenchRun(b *testing.B, engine string, iter readerBenchIter) {
	_, _, ends, _ := readerBenchFill(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var read, commits int
	var reading, closing, first, committing, cpu time.Duration
	var mallocs uint64
	var before, after runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		group := fmt.Sprintf("bench-%s-%d", engine, time.Now().UnixNano())
		prog := newReaderBenchProgress(ends)
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start, cpuStart := time.Now(), processCPU()
		firstAt, closeReader := iter(ctx, b, group, prog)
		last := time.Now()
		cpu += processCPU() - cpuStart
		b.StopTimer()
		runtime.ReadMemStats(&after)
		if err := closeReader(); err != nil {
			b.Errorf("Close: %v", err)
		}
		closing += time.Since(last)
		mallocs += after.Mallocs - before.Mallocs
		read += prog.read
		commits += prog.commits
		committing += prog.committing
		reading += last.Sub(start)
		first += firstAt.Sub(start)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(read)/reading.Seconds(), "msgs/s")
	b.ReportMetric(float64(mallocs)/float64(read), "allocs/msg")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(read), "cpu-ns/msg")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-msg-ms")
	b.ReportMetric(float64(closing.Microseconds())/1000/float64(b.N), "close-ms")
	if commits > 0 {
		b.ReportMetric(float64(committing.Microseconds())/float64(commits), "commit-us")
	}
}

// readerBenchConfig is the kafka.ReaderConfig of the sdk and kafka-go
// runs: kafka-go's defaults but for the fetch wait and the commit
// interval.
func readerBenchConfig(addrs []string, topic, group string, commitInterval time.Duration) kafka.ReaderConfig {
	return kafka.ReaderConfig{Brokers: addrs, Topic: topic, GroupID: group, StartOffset: kafka.FirstOffset,
		MaxWait: readerBenchMaxWait, CommitInterval: commitInterval}
}

func readerBenchSDK(b *testing.B, cfg kafka.ReaderConfig) *sdk.Reader {
	r, err := sdk.NewReader(cfg, sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// kafkaGoReader is what the sdk and kafka-go runs read with.
type kafkaGoReader interface {
	ReadMessage(context.Context) (kafka.Message, error)
	FetchMessage(context.Context) (kafka.Message, error)
	CommitMessages(context.Context, ...kafka.Message) error
	Close() error
}

// readMessages reads with ReadMessage (commits as CommitInterval says)
// until the whole topic was read.
func readMessages(ctx context.Context, b *testing.B, r kafkaGoReader, prog *readerBenchProgress) (firstAt time.Time) {
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			b.Fatalf("ReadMessage after %d messages: %v", prog.read, err)
		}
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		if prog.saw(m.Partition, m.Offset) {
			return firstAt
		}
	}
}

// fetchCommit reads with FetchMessage and commits synchronously with
// CommitMessages every every messages and at the end.
func fetchCommit(ctx context.Context, b *testing.B, r kafkaGoReader, prog *readerBenchProgress, every int) (firstAt time.Time) {
	pending := make([]kafka.Message, 0, every)
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			b.Fatalf("FetchMessage after %d messages: %v", prog.read, err)
		}
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		pending = append(pending, m)
		done := prog.saw(m.Partition, m.Offset)
		if len(pending) == every || done {
			start := time.Now()
			if err := r.CommitMessages(ctx, pending...); err != nil {
				b.Fatalf("CommitMessages after %d messages: %v", prog.read, err)
			}
			prog.committing += time.Since(start)
			prog.commits++
			pending = pending[:0]
		}
		if done {
			return firstAt
		}
	}
}

// BenchmarkReaderGroup: ReadMessage in a consumer group with commits every
// second (CommitInterval 1s), on sdk.Reader and kafka-go's kafka.Reader,
// and franz-go's group consumer (PollFetches, records iterated, autocommit
// every second) for reference.
func BenchmarkReaderGroup(b *testing.B) {
	addrs, topic, _, _ := readerBenchFill(b)
	b.Run("engine=sdk", func(b *testing.B) {
		readerBenchRun(b, "sdk", func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (time.Time, func() error) {
			r := readerBenchSDK(b, readerBenchConfig(addrs, topic, group, time.Second))
			return readMessages(ctx, b, r, prog), r.Close
		})
	})
	b.Run("engine=kafka-go", func(b *testing.B) {
		readerBenchRun(b, "kafka-go", func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (time.Time, func() error) {
			r := kafka.NewReader(readerBenchConfig(addrs, topic, group, time.Second))
			return readMessages(ctx, b, r, prog), r.Close
		})
	})
	b.Run("engine=franz-go", func(b *testing.B) {
		readerBenchRun(b, "franz-go", func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (time.Time, func() error) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second),
				kgo.FetchMaxWait(readerBenchMaxWait))
			if err != nil {
				b.Fatal(err)
			}
			var first time.Time
			for done := false; !done; {
				fs := cl.PollFetches(ctx)
				if errs := fs.Errors(); len(errs) > 0 {
					b.Fatalf("PollFetches after %d messages: %v", prog.read, errs[0].Err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if first.IsZero() {
						first = time.Now()
					}
					if prog.saw(int(r.Partition), r.Offset) {
						done = true
					}
				})
			}
			return first, func() error { cl.Close(); return nil }
		})
	})
	// The same franz-go loop behind kafka-go's API: a kafka.Message built
	// and returned by value per call, through the interface the other
	// engines are read through. What this costs above engine=franz-go
	// is the API's, which any drop-in pays.
	b.Run("engine=franz-go-as-kafka-go", func(b *testing.B) {
		readerBenchRun(b, "franz-go-as-kafka-go", func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (time.Time, func() error) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second),
				kgo.FetchMaxWait(readerBenchMaxWait))
			if err != nil {
				b.Fatal(err)
			}
			return readMessages(ctx, b, &kgoMessages{cl: cl}, prog), func() error { cl.Close(); return nil }
		})
	})
}

// kgoMessages hands out a kgo client's records one kafka.Message per
// ReadMessage call, with nothing else: the least a kafka-go-shaped
// Reader on the engine does.
type kgoMessages struct {
	cl   *kgo.Client
	recs []*kgo.Record
}

func (k *kgoMessages) ReadMessage(ctx context.Context) (kafka.Message, error) {
	for len(k.recs) == 0 {
		fs := k.cl.PollRecords(ctx, 0)
		if errs := fs.Errors(); len(errs) > 0 {
			return kafka.Message{}, errs[0].Err
		}
		k.recs = fs.Records()
	}
	rec := k.recs[0]
	k.recs = k.recs[1:]
	return kafka.Message{Topic: rec.Topic, Partition: int(rec.Partition), Offset: rec.Offset,
		Key: rec.Key, Value: rec.Value, Time: rec.Timestamp.UTC()}, nil
}

func (k *kgoMessages) FetchMessage(ctx context.Context) (kafka.Message, error) {
	return k.ReadMessage(ctx)
}
func (k *kgoMessages) CommitMessages(context.Context, ...kafka.Message) error { return nil }
func (k *kgoMessages) Close() error                                           { k.cl.Close(); return nil }

// BenchmarkReaderFetchCommit: FetchMessage with a synchronous
// CommitMessages (CommitInterval 0) of every 100 messages, over the whole
// topic, and of every message, over its first 20,000 messages, on
// sdk.Reader and kafka-go's kafka.Reader.
func BenchmarkReaderFetchCommit(b *testing.B) {
	addrs, topic, _, _ := readerBenchFill(b)
	for _, every := range []struct{ n, limit int }{{100, 0}, {1, 20000}} {
		b.Run(fmt.Sprintf("every=%d/engine=sdk", every.n), func(b *testing.B) {
			readerBenchRun(b, "sdk", func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (time.Time, func() error) {
				prog.limit = every.limit
				r := readerBenchSDK(b, readerBenchConfig(addrs, topic, group, 0))
				return fetchCommit(ctx, b, r, prog, every.n), r.Close
			})
		})
		b.Run(fmt.Sprintf("every=%d/engine=kafka-go", every.n), func(b *testing.B) {
			readerBenchRun(b, "kafka-go", func(ctx context.Context, b *testing.B, group string, prog *readerBenchProgress) (time.Time, func() error) {
				prog.limit = every.limit
				r := kafka.NewReader(readerBenchConfig(addrs, topic, group, 0))
				return fetchCommit(ctx, b, r, prog, every.n), r.Close
			})
		})
	}
}
