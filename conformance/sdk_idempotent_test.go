//go:build conformance

package conformance

// The idempotent sdk.Writer against the real broker: churn side by side
// with the at-least-once path, responses dropped after the broker stored
// the batch, and a refused producer ID.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/writebench"
	"github.com/azkafka/azkafka/sdk"
)

// partitionValues reads every partition of the rig's topic straight from
// the broker, in offset order.
func (r *sdkcRig) partitionValues(t *testing.T) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return deliverytest.PartitionValues(ctx, t, r.checkTopic())
}

// reorders counts, over every partition, the messages stored after a
// message handed to the Writer later in the same sequence; group maps a
// message's index in deliverytest.Messages to its sequence (a call, or
// the whole run when calls were made one after another).
func reorders(parts [][]string, group func(index int) int) int {
	n := 0
	for _, vals := range parts {
		last := map[int]int{}
		for _, v := range vals {
			i, _ := strconv.Atoi(v[strings.LastIndexByte(v, '-')+1:])
			g := group(i)
			if prev, ok := last[g]; ok && i < prev {
				n++
				continue
			}
			last[g] = i
		}
	}
	return n
}

type churnFigures struct {
	mode                 string
	kills                int64
	lost, dups, reorders int
	retries, bumps       int64
	took                 time.Duration
}

// idempotentChurn writes n messages (4 goroutines, calls of 100) through
// a proxy that kills a random connection about every 200 ms, and counts
// what the broker holds.
func idempotentChurn(t *testing.T, n int, idempotent, async bool) churnFigures {
	rig := newSDKCRig(t, "ichurn", 6)
	sent := deliverytest.Messages("ichurn", n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := append(sdkcOptions(), sdk.WithRetry(10, 100*time.Millisecond, time.Second), sdk.WithIdempotence(idempotent))
	kw := rig.writerConfig(async)
	var completionErrs atomic.Int64
	if async {
		kw.Completion = func(msgs []kafka.Message, err error) {
			if err != nil {
				completionErrs.Add(int64(len(msgs)))
			}
		}
	}
	w, err := sdk.NewWriter(kw, opts...)
	if err != nil {
		t.Fatal(err)
	}
	churn := deliverytest.StartChurn(rig.proxy, uint64(time.Now().UnixNano()))
	start := time.Now()
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
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	took := time.Since(start)
	churn.Stop()
	st := w.Stats()
	if completionErrs.Load() != 0 {
		t.Errorf("Completion reported %d failed messages", completionErrs.Load())
	}
	lost, dups := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
	mode := "at-least-once"
	if idempotent {
		mode = "idempotent"
	}
	if async {
		mode += "/async"
	} else {
		mode += "/sync"
	}
	return churnFigures{
		mode: mode, kills: churn.Kills(), lost: lost, dups: dups,
		// Calls run concurrently: order is defined within a call.
		reorders: reorders(rig.partitionValues(t), func(i int) int { return i / 100 }),
		retries:  st.SDK.Retries, bumps: st.SDK.EpochBumps, took: took,
	}
}

// TestSDKIdempotentChurn: 100,000 messages, a random connection killed
// about every 200 ms while producing, with the idempotent Writer (sync
// and async) and, side by side, the at-least-once path: the idempotent
// runs lose nothing, store no duplicate and keep each call's order in
// every partition.
func TestSDKIdempotentChurn(t *testing.T) {
	inLane(t, &brokerLane)
	const n = 100000
	var rows []churnFigures
	for _, c := range []struct{ idempotent, async bool }{{true, false}, {true, true}, {false, false}} {
		f := idempotentChurn(t, n, c.idempotent, c.async)
		rows = append(rows, f)
		if f.kills == 0 {
			t.Fatalf("%s: no connection killed", f.mode)
		}
		if f.lost != 0 {
			t.Errorf("%s: %d of %d messages lost", f.mode, f.lost, n)
		}
		if c.idempotent && (f.dups != 0 || f.reorders != 0) {
			t.Errorf("%s: %d duplicates and %d reordered messages on the broker, want 0 and 0", f.mode, f.dups, f.reorders)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "churn on Kafka, %d messages per run:\n", n)
	fmt.Fprintf(&b, "%-22s %6s %5s %10s %9s %8s %6s %s\n", "mode", "kills", "lost", "duplicates", "reordered", "retries", "bumps", "took")
	for _, f := range rows {
		fmt.Fprintf(&b, "%-22s %6d %5d %10d %9d %8d %6d %v\n", f.mode, f.kills, f.lost, f.dups, f.reorders, f.retries, f.bumps, f.took.Round(time.Millisecond))
	}
	t.Log(b.String())
}

// TestSDKIdempotentLostResponses: every 3rd Produce request is handled by
// the broker and its response dropped (the connection closed): the
// resends are the same batches, which the broker acknowledges without
// storing them again.
func TestSDKIdempotentLostResponses(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			rig := newSDKCRig(t, "ilost", 3)
			var injected atomic.Int64
			rig.proxy.OnRequest(deliverytest.EveryNth(3, 30, kproxy.CloseAfter, &injected, 0))
			cfg := rig.writerConfig(async)
			// Async calls all ride in the engine's buffer at once, and
			// BatchSize caps no batch there: small batches by bytes keep
			// the Produce requests many, so that every 3rd has something
			// to lose.
			cfg.BatchBytes = 2048
			w, err := sdk.NewWriter(cfg, sdkcOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			sent := deliverytest.Messages("l", 3000)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for off := 0; off < len(sent); off += 50 {
				if err := w.WriteMessages(ctx, sent[off:off+50]...); err != nil {
					t.Errorf("WriteMessages: %v", err)
				}
			}
			if err := w.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			st := w.Stats()
			lost, dups := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
			bad := reorders(rig.partitionValues(t), func(int) int { return 0 })
			t.Logf("responses dropped %d: lost %d, duplicates %d, reordered %d; producer %d epoch %d, produce requests resent %d",
				injected.Load(), lost, dups, bad, st.SDK.ProducerID, st.SDK.ProducerEpoch, st.SDK.Retries)
			if injected.Load() == 0 {
				t.Fatal("no response dropped")
			}
			if lost != 0 || dups != 0 || bad != 0 {
				t.Errorf("lost %d, duplicates %d, reordered %d; want 0", lost, dups, bad)
			}
			if st.SDK.Retries == 0 || !st.SDK.Idempotent {
				t.Errorf("stats %+v: want the resent requests counted on an idempotent Writer", st.SDK)
			}
		})
	}
}

// TestSDKIdempotentInitRefused: the broker's InitProducerId answer turned
// into CLUSTER_AUTHORIZATION_FAILED by the proxy (what an authorizer
// without IdempotentWrite answers): auto warns once and writes at least
// once; an explicit true returns the error and writes nothing.
func TestSDKIdempotentInitRefused(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(fmt.Sprintf("explicit=%v", explicit), func(t *testing.T) {
			rig := newSDKCRig(t, "irefused", 1)
			rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
				if req.Key != 22 {
					return resp
				}
				r, err := kproxy.DecodeResponse(req, resp)
				if err != nil {
					return resp
				}
				ir := r.(*kmsg.InitProducerIDResponse)
				ir.ErrorCode, ir.ProducerID, ir.ProducerEpoch = int16(kafka.ClusterAuthorizationFailed), -1, -1
				return kproxy.EncodeResponse(req, ir)
			})
			var logs deliverytest.LogBuffer
			opts := append(sdkcOptions(), sdk.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			if explicit {
				opts = append(opts, sdk.WithIdempotence(true))
			}
			w, err := sdk.NewWriter(rig.writerConfig(false), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sent := deliverytest.Messages("i", 20)
			err = w.WriteMessages(ctx, sent...)
			counts := rig.consumeAll(t)
			log := logs.String()
			t.Logf("explicit=%v: WriteMessages: %v; stored %d; log: %s", explicit, err, len(counts), log)
			if explicit {
				if !errors.Is(err, kafka.ClusterAuthorizationFailed) || len(counts) != 0 {
					t.Fatalf("want the refusal and nothing stored")
				}
				return
			}
			if lost, _ := deliverytest.LostAndDuplicated(sent, counts); err != nil || lost != 0 {
				t.Fatalf("auto: err %v, %d lost", err, lost)
			}
			if strings.Count(log, "refused a producer ID") != 1 {
				t.Fatalf("auto: want one warning")
			}
		})
	}
}

// idempotentBenchCases are the cases of BenchmarkSDKIdempotentWriter: sync
// calls of 100, sync calls of 10 with kafka-go's default BatchTimeout (1s),
// 4 goroutines with calls of 500, and 12 goroutines with calls of 4 (as
// the 3-node failover test writes), at acks=all; sync calls of 100 and of
// 10 at acks=1, and of 10 at acks=0.
var idempotentBenchCases = []struct {
	name                string
	goroutines, perCall int
	batchTimeout        time.Duration
	acks                kafka.RequiredAcks
}{
	{"sync-100", 1, 100, 10 * time.Millisecond, kafka.RequireAll},
	{"sync-10-default-timeout", 1, 10, 0, kafka.RequireAll},
	{"pipelined-4x500", 4, 500, 10 * time.Millisecond, kafka.RequireAll},
	{"concurrent-12x4", 12, 4, 5 * time.Millisecond, kafka.RequireAll},
	{"acks1-sync-100", 1, 100, 10 * time.Millisecond, kafka.RequireOne},
	{"acks1-sync-10-default-timeout", 1, 10, 0, kafka.RequireOne},
	{"acks0-sync-10-default-timeout", 1, 10, 0, kafka.RequireNone},
}

// idempotentBenchClients returns the writers compared at acks: raw
// kafka.Writer, sdk.Writer (at acks=all both at least once and
// idempotent), franz-go's kgo (idempotent at acks=all, its default, else
// without idempotence).
func idempotentBenchClients(addrs []string, topic string, perCall int, batchTimeout time.Duration, acks kafka.RequiredAcks) []struct {
	name string
	new  func(testing.TB) writebench.Writer
} {
	kw := func() *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, RequiredAcks: acks, BatchTimeout: batchTimeout}
	}
	newSDK := func(tb testing.TB, idempotent bool, balancer kafka.Balancer) writebench.Writer {
		kwr := kw()
		kwr.Balancer = balancer
		w, err := sdk.NewWriter(kwr, sdk.WithAZ("az-a"), sdk.WithIdempotence(idempotent), sdk.WithGetenv(func(string) string { return "" }),
			sdk.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			tb.Fatal(err)
		}
		return w
	}
	franz := func(tb testing.TB, more ...kgo.Opt) writebench.Writer {
		return writebench.NewKgo(tb, acks, append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(batchTimeout)}, more...)...)
	}
	clients := []struct {
		name string
		new  func(testing.TB) writebench.Writer
	}{
		{"raw", func(testing.TB) writebench.Writer { return kw() }},
	}
	if acks == kafka.RequireAll {
		clients = append(clients, []struct {
			name string
			new  func(testing.TB) writebench.Writer
		}{
			{"sdk-at-least-once", func(tb testing.TB) writebench.Writer { return newSDK(tb, false, nil) }},
			{"sdk-idempotent", func(tb testing.TB) writebench.Writer { return newSDK(tb, true, nil) }},
		}...)
	} else {
		clients = append(clients, struct {
			name string
			new  func(testing.TB) writebench.Writer
		}{"sdk", func(tb testing.TB) writebench.Writer { return newSDK(tb, false, nil) }})
		// kafka-go's RoundRobin with a ChunkSize of a call's messages
		// gives each call one partition: one partition batch a
		// request.
		clients = append(clients, struct {
			name string
			new  func(testing.TB) writebench.Writer
		}{"sdk-chunked", func(tb testing.TB) writebench.Writer {
			return newSDK(tb, false, &kafka.RoundRobin{ChunkSize: perCall})
		}})
	}
	// franz-go with its default partitioner (the messages have keys: it
	// hashes them, spreading a call over the partitions its keys name),
	// and with round robin, as kafka-go's default Balancer (each call
	// spread over the partitions), which the sdk keeps.
	return append(clients, []struct {
		name string
		new  func(testing.TB) writebench.Writer
	}{
		{"franz-go", func(tb testing.TB) writebench.Writer { return franz(tb) }},
		{"franz-go-roundrobin", func(tb testing.TB) writebench.Writer {
			return franz(tb, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		}},
	}...)
}

// BenchmarkSDKIdempotentWriter is BenchmarkWriter of sdk/bench_test.go on
// the real broker (6 partitions, 100-byte values; acks=all unless the case
// names another). Run it with
//
//	go test -tags conformance -run '^$' -bench BenchmarkSDKIdempotentWriter -benchmem -count 6 ./conformance
//
// with AZKAFKA_CONFORMANCE_BROKERS set, or inside run.sh with
// TestSDKIdempotentBenchmark, and compare with benchstat -col /client -row /case.
func BenchmarkSDKIdempotentWriter(b *testing.B) {
	addrs := brokers(b)
	topic := idempotentBenchTopic(b, addrs)
	for _, sc := range idempotentBenchCases {
		for _, cl := range idempotentBenchClients(addrs, topic, sc.perCall, sc.batchTimeout, sc.acks) {
			b.Run("case="+sc.name+"/client="+cl.name, func(b *testing.B) {
				writebench.Run(b, cl.new(b), sc.goroutines, sc.perCall, 100, writebench.Same)
			})
		}
	}
}

func idempotentBenchTopic(tb testing.TB, addrs []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-sdk-ibench-%d", time.Now().UnixNano())
	createTopic(tb, ctx, addrs, topic, 6)
	return topic
}

// TestSDKIdempotentBenchmark runs the cases of BenchmarkSDKIdempotentWriter
// on run.sh's broker when AZKAFKA_CONFORMANCE_BENCH names a file: 6 rounds,
// the clients alternating, written in the benchmark format for benchstat:
//
//	AZKAFKA_CONFORMANCE_BENCH=/tmp/bench.txt CONFORMANCE_RUN=TestSDKIdempotentBenchmark ./conformance/run.sh
//	benchstat -col /client -row /case /tmp/bench.txt
func TestSDKIdempotentBenchmark(t *testing.T) {
	out := os.Getenv("AZKAFKA_CONFORMANCE_BENCH")
	if out == "" {
		t.Skip("AZKAFKA_CONFORMANCE_BENCH=<file> runs the writer benchmark")
	}
	addrs := brokers(t)
	topic := idempotentBenchTopic(t, addrs)
	var lines strings.Builder
	for round := 0; round < 6; round++ {
		for _, sc := range idempotentBenchCases {
			for _, cl := range idempotentBenchClients(addrs, topic, sc.perCall, sc.batchTimeout, sc.acks) {
				r := testing.Benchmark(func(b *testing.B) { writebench.Run(b, cl.new(b), sc.goroutines, sc.perCall, 100, writebench.Same) })
				line := fmt.Sprintf("BenchmarkSDKIdempotentWriter/case=%s/client=%s-%d\t%s\t%s\n", sc.name, cl.name, runtime.GOMAXPROCS(0), r.String(), r.MemString())
				lines.WriteString(line)
				t.Log(strings.TrimSpace(line))
			}
		}
	}
	if err := os.WriteFile(out, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
