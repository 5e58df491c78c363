//go:build conformance

package conformance

// The sdk.Writer and sdk.Reader fault, churn and overhead tests of
// sdk/*_test.go, against the real broker: every client talks to it through
// internal/testkit/kproxy (which advertises itself in Metadata and FindCoordinator
// responses, so the single real broker is only reached through the proxy),
// and checks read straight from the broker.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// sdkcRig is one proxy in front of the real broker, and a fresh topic.
type sdkcRig struct {
	addrs []string
	proxy *kproxy.Proxy
	topic string
	parts int
}

func newSDKCRig(t *testing.T, name string, parts int) *sdkcRig {
	t.Helper()
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-sdk-%s-%d", name, time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, parts)
	p, err := kproxy.Start(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &sdkcRig{addrs: addrs, proxy: p, topic: topic, parts: parts}
}

// sdkcOptions: an explicit AZ (no detection, loopback only), quick
// retries, a private connection limiter.
func sdkcOptions() []sdk.Option {
	return []sdk.Option{
		sdk.WithAZ("az-a"),
		sdk.WithRetry(20, 5*time.Millisecond, 200*time.Millisecond),
		sdk.WithConnLimiter(rate.NewLimiter(500, 100)),
		sdk.WithRedialBackoff(retry.Backoff{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithGetenv(func(string) string { return "" }),
	}
}

func (r *sdkcRig) writerConfig(async bool) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(r.proxy.Addr()),
		Topic:        r.topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    100,
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 10 * time.Second,
		Async:        async,
	}
}

func (r *sdkcRig) groupConfig(group string) kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers:           []string{r.proxy.Addr()},
		GroupID:           group,
		Topic:             r.topic,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    6 * time.Second, // Kafka's group.min.session.timeout.ms
		RebalanceTimeout:  6 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
	}
}

// checkTopic is the rig's topic as the delivery checks read it.
func (r *sdkcRig) checkTopic() deliverytest.Topic {
	return deliverytest.Topic{Addrs: r.addrs, Name: r.topic, Partitions: r.parts}
}

// consumeAll counts every value of the topic, read from the broker.
func (r *sdkcRig) consumeAll(t *testing.T) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return deliverytest.ConsumeAll(ctx, t, r.checkTopic())
}

// requireCommittedToEnd checks that the group committed every partition
// up to its end offset.
func (r *sdkcRig) requireCommittedToEnd(t *testing.T, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deliverytest.RequireCommittedToEnd(ctx, t, r.checkTopic(), group)
}

// endOffsets returns the end offset of every partition.
func (r *sdkcRig) endOffsets(t *testing.T) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return deliverytest.EndOffsets(ctx, t, r.checkTopic())
}

// sdkcFault applies act to every 3rd request with one of keys, at most 15
// times; refuse instead makes the port refuse connects for 400 ms twice.
type sdkcFault struct {
	name   string
	act    kproxy.Action
	refuse bool
}

var sdkcFaults = []sdkcFault{
	{name: "close before", act: kproxy.CloseBefore},
	{name: "close after", act: kproxy.CloseAfter},
	{name: "reset", act: kproxy.Reset},
	{name: "refuse", refuse: true},
}

func (f sdkcFault) start(p *kproxy.Proxy, injected *atomic.Int64, keys ...int16) (stop func()) {
	if f.refuse {
		return deliverytest.RefuseConnects(p, injected)
	}
	p.OnRequest(deliverytest.EveryNth(3, 15, f.act, injected, keys...))
	return func() { p.OnRequest(nil) }
}

// TestSDKWriterFaults: sdk.Writer delivers every message through each
// fault on the real broker, synchronously and asynchronously.
func TestSDKWriterFaults(t *testing.T) {
	for _, f := range sdkcFaults {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", f.name, async), func(t *testing.T) {
				rig := newSDKCRig(t, "wfault", 3)
				var injected atomic.Int64
				stop := f.start(rig.proxy, &injected, 0) // Produce
				sent := deliverytest.Messages("w", 2000)
				var completionErrs atomic.Int64
				kw := rig.writerConfig(async)
				if async {
					kw.Completion = func(msgs []kafka.Message, err error) {
						if err != nil {
							completionErrs.Add(int64(len(msgs)))
						}
					}
				}
				w, err := sdk.NewWriter(kw, sdkcOptions()...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				for off := 0; off < len(sent); off += 50 {
					if err := w.WriteMessages(ctx, sent[off:off+50]...); err != nil {
						t.Errorf("WriteMessages: %v", err)
					}
					time.Sleep(5 * time.Millisecond) // spread the calls over the faults
				}
				if err := w.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				stop()
				st := w.Stats()
				lost, dups := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
				t.Logf("faults=%d messages=%d lost=%d duplicates=%d retries=%d",
					injected.Load(), len(sent), lost, dups, st.SDK.Retries)
				if injected.Load() == 0 {
					t.Fatal("no fault injected")
				}
				if lost != 0 || completionErrs.Load() != 0 {
					t.Errorf("lost %d messages, Completion reported %d failures", lost, completionErrs.Load())
				}
				if (f.act == kproxy.CloseBefore || f.act == kproxy.Reset) && !f.refuse && dups != 0 {
					t.Errorf("%d duplicates, but the broker never saw the failed requests", dups)
				}
			})
		}
	}
}

// TestSDKReaderFaults: a consumer-group sdk.Reader reads and commits every
// message through each fault (on Fetch, OffsetCommit and Heartbeat
// requests) on the real broker without surfacing an error.
func TestSDKReaderFaults(t *testing.T) {
	const n = 2000
	for _, f := range sdkcFaults {
		t.Run(f.name, func(t *testing.T) {
			rig := newSDKCRig(t, "rfault", 3)
			sent := deliverytest.Messages("r", n)
			w := &kafka.Writer{Addr: kafka.TCP(rig.addrs...), Topic: rig.topic, Balancer: &kafka.Hash{},
				RequiredAcks: kafka.RequireAll, BatchSize: 20, BatchTimeout: time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := w.WriteMessages(ctx, sent...); err != nil {
				t.Fatal(err)
			}
			w.Close()
			cfg := rig.groupConfig("g-" + rig.topic)
			cfg.MaxBytes = 2048 // many small fetches
			r, err := sdk.NewReader(cfg, sdkcOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			var injected atomic.Int64
			stop := f.start(rig.proxy, &injected, 1, 8, 12) // Fetch, OffsetCommit, Heartbeat
			seen := map[string]int{}
			for len(seen) < n {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					t.Fatalf("FetchMessage after %d messages: %v", len(seen), err)
				}
				seen[string(m.Value)]++
				if err := r.CommitMessages(ctx, m); err != nil {
					t.Fatalf("CommitMessages: %v", err)
				}
			}
			stop()
			st := r.Stats()
			r.Close()
			lost, dups := deliverytest.LostAndDuplicated(sent, seen)
			t.Logf("faults=%d lost=%d duplicates=%d absorbed=%d", injected.Load(), lost, dups, st.SDK.TransientErrors)
			if injected.Load() == 0 {
				t.Fatal("no fault injected")
			}
			if lost != 0 {
				t.Errorf("%d messages never read", lost)
			}
			rig.requireCommittedToEnd(t, cfg.GroupID)
		})
	}
}

// TestSDKChurn: 100,000 messages produced by an sdk.Writer and consumed by
// a consumer-group sdk.Reader on the real broker while the proxy kills a
// connection at random about every 200 ms during production.
func TestSDKChurn(t *testing.T) {
	inLane(t, &brokerLane)
	const n = 100000
	rig := newSDKCRig(t, "churn", 6)
	sent := deliverytest.Messages("churn", n)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The default retry policy (10 attempts, 100ms..1s).
	opts := append(sdkcOptions(), sdk.WithRetry(10, 100*time.Millisecond, time.Second))
	w, err := sdk.NewWriter(rig.writerConfig(false), opts...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rig.groupConfig("churn-" + rig.topic)
	var readerErrors atomic.Int64
	cfg.ErrorLogger = kafka.LoggerFunc(func(format string, args ...any) {
		if readerErrors.Add(1) <= 50 {
			t.Logf("reader (kafka-go): "+format, args...)
		}
	})
	r, err := sdk.NewReader(cfg, append(opts, sdk.WithLogger(slog.New(slog.NewTextHandler(tWriter{t}, nil))))...)
	if err != nil {
		t.Fatal(err)
	}

	// Churn: close a random connection, or arm a one-shot CloseAfter or
	// Reset for the next request.
	churn := deliverytest.StartChurn(rig.proxy, uint64(time.Now().UnixNano()))

	start := time.Now()
	seen := make(map[string]int, n)
	consumerErr := make(chan error, 1)
	// The consumer gets 2 minutes after the producers finish; a lost
	// message would otherwise keep it waiting until the test's deadline.
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	ends := make(chan map[int]int64, 1)
	go func() { consumerErr <- deliverytest.ConsumeToEnd(consumerCtx, r, n, ends, seen) }()
	var wg sync.WaitGroup
	var next atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off := int(next.Add(100)) - 100
				if off >= n {
					return
				}
				if err := w.WriteMessages(ctx, sent[off:min(off+100, n)]...); err != nil {
					t.Errorf("WriteMessages: %v", err)
				}
				time.Sleep(50 * time.Millisecond) // spread over ~15 s of churn
			}
		}()
	}
	wg.Wait()
	produced := time.Since(start)
	// The churn stops with production: kept on, it falls on the reader's
	// two or three connections alone, and kafka-go's group join, whose
	// JoinGroup blocks for seconds, was then killed every time (1 run in
	// 6: the group never rejoined).
	churn.Stop()
	w.Close()
	wst := w.Stats()
	ends <- rig.endOffsets(t)
	consumerDeadline := time.AfterFunc(2*time.Minute, stopConsumer)
	defer consumerDeadline.Stop()
	if err := <-consumerErr; err != nil {
		t.Errorf("consumer error after %d messages: %v", len(seen), err)
	}
	rst := r.Stats()
	r.Close()

	lostB, dupsB := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
	lostC, dupsC := deliverytest.LostAndDuplicated(sent, seen)
	t.Logf("churn on Kafka: %d messages, produced in %v, consumed in %v, connections killed %d",
		n, produced.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), churn.Kills())
	t.Logf("churn on Kafka: broker lost %d duplicates %d; consumer lost %d duplicates %d; writer retries %d; reader absorbed %d",
		lostB, dupsB, lostC, dupsC, wst.SDK.Retries, rst.SDK.TransientErrors)
	if churn.Kills() == 0 {
		t.Fatal("no connection killed")
	}
	if lostB != 0 || lostC != 0 {
		t.Errorf("lost: %d not on the broker, %d never consumed", lostB, lostC)
	}
	if dupsB != 0 { // RequireAll: the Writer is idempotent
		t.Errorf("%d duplicates on the broker from an idempotent Writer", dupsB)
	}
	rig.requireCommittedToEnd(t, cfg.GroupID)
}

// BenchmarkSDKWriter compares sdk.Writer with a raw kafka.Writer on the
// real broker: each op writes 100 messages (one full batch, acks=all).
// Run it with
//
//	go test -tags conformance -run '^$' -bench BenchmarkSDKWriter -count 6 ./conformance
//
// with AZKAFKA_CONFORMANCE_BROKERS set, and compare with benchstat.
func BenchmarkSDKWriter(b *testing.B) {
	addrs := brokers(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-sdk-bench-%d", time.Now().UnixNano())
	createTopic(b, ctx, addrs, topic, 1)
	cfg := func() *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, RequiredAcks: kafka.RequireAll,
			BatchSize: 100, BatchTimeout: 50 * time.Millisecond}
	}
	b.Run("raw", func(b *testing.B) { sdkcBenchWrites(b, cfg()) })
	b.Run("sdk", func(b *testing.B) {
		w, err := sdk.NewWriter(cfg(), sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }))
		if err != nil {
			b.Fatal(err)
		}
		sdkcBenchWrites(b, w)
	})
}

func sdkcBenchWrites(b *testing.B, w interface {
	WriteMessages(context.Context, ...kafka.Message) error
	Close() error
}) {
	defer w.Close()
	msgs := deliverytest.Messages("bench", 100)
	ctx := context.Background()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(msgs))/time.Since(start).Seconds(), "msgs/s")
}

// tWriter writes log lines to the test log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
