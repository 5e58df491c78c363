package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// readerBenchMessages is the number of messages BenchmarkReader's topic
// holds: $BENCH_READER_MESSAGES, else 200000.
func readerBenchMessages(b *testing.B) int {
	n := 200_000
	if v := os.Getenv("BENCH_READER_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("BENCH_READER_MESSAGES=%q: want a positive number", v)
		}
	}
	return n
}

// BenchmarkReader compares, on the same embedded broker and in the same
// run, sdk.Reader, kafka-go's kafka.Reader and franz-go's kgo consumer
// (a test-only dependency), each consuming a topic of 6 partitions
// pre-filled with $BENCH_READER_MESSAGES (default 200000) keyed messages
// of 100-byte values, with a new consumer group per iteration and
// kafka-go's default fetch settings (MaxBytes 1 MB, MaxWait 10 s):
//
//   - read: ReadMessage with CommitInterval 1s (sdk, kafka-go), or
//     PollFetches with autocommit every 1s (franz-go);
//   - fetch-commit-100: FetchMessage and a synchronous CommitMessages
//     every 100 messages (sdk, kafka-go);
//   - fetch-commit-1: the same with a commit per message, over a
//     twentieth of the messages.
//
// It reports msgs/s from the Reader's creation to the last message
// (first-ms of it is the time to the first message: the group join),
// allocs/msg (runtime Mallocs over the iteration, per
// message; they include the in-process broker's, the same for every
// engine) and close-ms, the time Close takes once all is read. The
// -unguarded engines are the same clients with the frame guard off
// (sdk.SetFrameGuard), to measure its cost; kafka-go-dialer is kafka-go's
// Reader given NewAZAwareDialer. Compare
// with benchstat:
//
//	go test -run '^$' -bench BenchmarkReader -benchmem -count 5 ./sdk > /tmp/rbench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /engine /tmp/rbench.txt
func BenchmarkReader(b *testing.B) {
	n := readerBenchMessages(b)
	c := embedded.StartT(b, embedded.Topic("rbench", 6))
	fillBenchTopic(b, c.Addrs(), "rbench", n)
	var groups atomic.Int64
	group := func() string { return fmt.Sprintf("rbench-%d", groups.Add(1)) }
	config := func(commitInterval time.Duration) kafka.ReaderConfig {
		return kafka.ReaderConfig{
			Brokers:        c.Addrs(),
			GroupID:        group(),
			Topic:          "rbench",
			StartOffset:    kafka.FirstOffset,
			CommitInterval: commitInterval,
		}
	}
	newSDK := func(b *testing.B, cfg kafka.ReaderConfig) benchConsumer {
		r, err := sdk.NewReader(cfg, sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }),
			sdk.WithLogger(slog.New(slog.DiscardHandler)),
			// A Reader per iteration, back to back, would spend its join
			// waiting for the process-wide connection rate limit.
			sdk.WithMaxConnRate(0, 1))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	newKafkaGo := func(_ *testing.B, cfg kafka.ReaderConfig) benchConsumer { return kafka.NewReader(cfg) }
	// kafka-go's Reader on NewAZAwareDialer: its connections read through
	// the frame guard in Validate mode.
	newKafkaGoDialer := func(b *testing.B, cfg kafka.ReaderConfig) benchConsumer {
		d, err := sdk.NewAZAwareDialer(nil, sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }),
			sdk.WithLogger(slog.New(slog.DiscardHandler)), sdk.WithMaxConnRate(0, 1))
		if err != nil {
			b.Fatal(err)
		}
		cfg.Dialer = d
		return kafka.NewReader(cfg)
	}
	for _, bc := range []struct {
		mode, engine string
		consume      func(b *testing.B) (first time.Duration, close func())
		share        int // the Reader reads n/share messages; 0: all
	}{
		{"read", "sdk", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newSDK(b, config(time.Second)), n, 0)
		}, 0},
		{"read", "sdk-unguarded", func(b *testing.B) (time.Duration, func()) {
			sdk.SetFrameGuard(false)
			defer sdk.SetFrameGuard(true)
			return readAllMessages(b, newSDK(b, config(time.Second)), n, 0)
		}, 0},
		{"read", "kafka-go", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newKafkaGo(b, config(time.Second)), n, 0)
		}, 0},
		{"read", "kafka-go-dialer", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newKafkaGoDialer(b, config(time.Second)), n, 0)
		}, 0},
		{"read", "kafka-go-dialer-unguarded", func(b *testing.B) (time.Duration, func()) {
			sdk.SetFrameGuard(false)
			defer sdk.SetFrameGuard(true)
			return readAllMessages(b, newKafkaGoDialer(b, config(time.Second)), n, 0)
		}, 0},
		{"read", "franz-go", func(b *testing.B) (time.Duration, func()) {
			return pollAllRecords(b, c.Addrs(), group(), "rbench", n)
		}, 0},
		{"fetch-commit-100", "sdk", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newSDK(b, config(0)), n, 100)
		}, 0},
		{"fetch-commit-100", "kafka-go", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newKafkaGo(b, config(0)), n, 100)
		}, 0},
		{"fetch-commit-1", "sdk", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newSDK(b, config(0)), n/20, 1)
		}, 20},
		{"fetch-commit-1", "kafka-go", func(b *testing.B) (time.Duration, func()) {
			return readAllMessages(b, newKafkaGo(b, config(0)), n/20, 1)
		}, 20},
	} {
		b.Run("mode="+bc.mode+"/engine="+bc.engine, func(b *testing.B) {
			b.ReportAllocs()
			var first, reading, closing time.Duration
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				f, closeFn := bc.consume(b)
				reading += time.Since(start)
				first += f
				closeStart := time.Now()
				closeFn()
				closing += time.Since(closeStart)
			}
			runtime.ReadMemStats(&after)
			msgs := float64(b.N * n)
			if bc.share > 0 {
				msgs = float64(b.N * (n / bc.share))
			}
			b.ReportMetric(msgs/reading.Seconds(), "msgs/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/msgs, "allocs/msg")
			b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "first-ms")
			b.ReportMetric(float64(closing.Microseconds())/1e3/float64(b.N), "close-ms")
		})
	}
}

// benchConsumer is what sdk.Reader and kafka.Reader share.
type benchConsumer interface {
	ReadMessage(context.Context) (kafka.Message, error)
	FetchMessage(context.Context) (kafka.Message, error)
	CommitMessages(context.Context, ...kafka.Message) error
	Close() error
}

// readAllMessages reads n messages with r: ReadMessage when commitEvery
// is 0, else FetchMessage with a CommitMessages of the last message every
// commitEvery. It returns the time to the first message and r's Close.
func readAllMessages(b *testing.B, r benchConsumer, n, commitEvery int) (time.Duration, func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var first time.Duration
	for i := 0; i < n; i++ {
		var err error
		if commitEvery == 0 {
			_, err = r.ReadMessage(ctx)
		} else {
			var m kafka.Message
			m, err = r.FetchMessage(ctx)
			if err == nil && (i+1)%commitEvery == 0 {
				err = r.CommitMessages(ctx, m)
			}
		}
		if err != nil {
			b.Fatalf("message %d of %d: %v", i, n, err)
		}
		if i == 0 {
			first = time.Since(start)
		}
	}
	return first, func() {
		if err := r.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	}
}

// pollAllRecords consumes n records with a kgo consumer of group, with
// autocommit every second, and returns the time to the first record and
// the client's Close.
func pollAllRecords(b *testing.B, addrs []string, group, topic string, n int) (time.Duration, func()) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var first time.Duration
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatalf("after %d of %d records: %v", got, n, err)
		}
		if got == 0 && fs.NumRecords() > 0 {
			first = time.Since(start)
		}
		got += fs.NumRecords()
	}
	return first, cl.Close
}

// fillBenchTopic writes n keyed messages of 100-byte values to topic,
// once per process and topic.
func fillBenchTopic(b *testing.B, addrs []string, topic string, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 100)
	for i := range value {
		value[i] = 'v'
	}
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprintf("key-%07d", i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("filling %s: %v", topic, err)
	}
}
