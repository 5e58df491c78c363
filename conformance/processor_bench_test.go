//go:build conformance

package conformance

// Exactly-once consume-transform-produce throughput on the real broker:
// sdk.Processor next to franz-go's GroupTransactSession driven directly
// (eostest.KgoJob), both running eostest.Job over the whole of a
// pre-filled topic with a fresh group and output topic per iteration.
//
//	CONFORMANCE_BENCH=BenchmarkProcessor CONFORMANCE_BENCH_COUNT=5 ./conformance/run.sh > /tmp/eosbench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /engine /tmp/eosbench.txt
//
// or, on a broker of your own,
//
//	AZKAFKA_CONFORMANCE_BROKERS=127.0.0.1:9092 go test -tags conformance -run '^$' -bench BenchmarkProcessor -benchmem -count 5 ./conformance > /tmp/eosbench.txt
//
// AZKAFKA_CONFORMANCE_EOS_BENCH_MESSAGES sets the input's size (default
// 200,000 keyed messages of 100 bytes on 6 partitions).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/eostest"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// Both engines' settings: eosproc's group timeouts, a fetch wait of
// 100 ms, kafka-go's fetch sizes (the sdk's from kafka.ReaderConfig's
// defaults), the sdk's default balancers, output uncompressed (the
// kafka.Writer's default; franz-go's is snappy), one transaction per
// poll of at most 10,000 records; and franz-go gets the sdk's metadata
// age and retry backoff: with its defaults (5 s; 250 ms to 5 s) a produce
// refused with CONCURRENT_TRANSACTIONS, as the first of a transaction
// often is while the previous one's markers are written, waits up to 5 s
// for the metadata refresh its retry asks for.
const (
	eosBenchValueSize  = 100
	eosBenchMaxWait    = 100 * time.Millisecond
	eosBenchTxnTimeout = 10 * time.Second
	eosBenchSession    = 6 * time.Second
	eosBenchHeartbeat  = 300 * time.Millisecond
	eosBenchPartBytes  = 1e6
	// eosBenchPoll is how often the group's committed offsets are
	// fetched while the processors run.
	eosBenchPoll = 10 * time.Millisecond
)

// eosBenchInput is the input every processor benchmark reads.
var eosBenchInput benchInput

func eosBenchMessages(tb testing.TB) int {
	v := os.Getenv("AZKAFKA_CONFORMANCE_EOS_BENCH_MESSAGES")
	if v == "" {
		return 200000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < eosParts {
		tb.Fatalf("AZKAFKA_CONFORMANCE_EOS_BENCH_MESSAGES=%q: want a whole number of messages, at least %d", v, eosParts)
	}
	return n
}

// eosBenchFill returns the input topic, filling it on the first call:
// message i keyed "<i % eosKeys>" with value "<i>" zero-padded to 100
// bytes, on eosParts partitions; the transaction coordinator is made
// ready too.
func eosBenchFill(b *testing.B) (addrs []string, topic string, ends []int64, total int) {
	b.Helper()
	return eosBenchInput.fill(b, "processor benchmark input", "azkafka-eos-bench-in", eosBenchMessages, eosParts,
		func(i int) *kgo.Record {
			return &kgo.Record{Key: strconv.AppendInt(nil, int64(i%eosKeys), 10), Value: fmt.Appendf(nil, "%0*d", eosBenchValueSize, i)}
		}, eosBenchTxnCoordinator)
}

// eosBenchTxnCoordinator initializes a transactional producer: on a fresh
// broker the first one creates the transaction state topic, which the
// first measured run would otherwise wait for.
func eosBenchTxnCoordinator(ctx context.Context, addrs []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(fmt.Sprintf("azkafka-eos-bench-warmup-%d", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, _, err = cl.ProducerID(ctx)
	return err
}

// eosBenchMember is one processor of an iteration: run runs it until ctx
// ends and closes it; txns counts its transactions once run returned.
type eosBenchMember struct {
	run  func(ctx context.Context) error
	txns func() (committed, aborted int64)
}

// eosBenchEngine makes a processor of group reading in and writing out,
// with transactional ID id.
type eosBenchEngine func(b *testing.B, addrs []string, group, in, out, id string) eosBenchMember

func eosBenchSDK(b *testing.B, addrs []string, group, in, out, id string) eosBenchMember {
	p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: addrs, GroupID: group, Topic: in, MaxWait: eosBenchMaxWait,
		HeartbeatInterval: eosBenchHeartbeat, SessionTimeout: eosBenchSession, RebalanceTimeout: eosBenchSession},
		&kafka.Writer{Topic: out, Balancer: &kafka.Hash{}},
		controlsOptions(sdk.WithTransactionalID(id), sdk.WithTransactionTimeout(eosBenchTxnTimeout))...)
	if err != nil {
		b.Fatal(err)
	}
	var st sdk.TxnStats
	return eosBenchMember{
		run: func(ctx context.Context) error {
			defer p.Close()
			err := p.Run(ctx, eostest.Job)
			st = p.Stats()
			return err
		},
		txns: func() (committed, aborted int64) {
			for _, n := range st.Aborted {
				aborted += n
			}
			return st.Committed, aborted
		},
	}
}

func eosBenchKgo(b *testing.B, addrs []string, group, in, out, id string) eosBenchMember {
	var committed, aborted atomic.Int64
	job := &eostest.KgoJob{Brokers: addrs, Group: group, In: in, Out: out, ID: id,
		Opts: []kgo.Opt{kgo.TransactionTimeout(eosBenchTxnTimeout), kgo.SessionTimeout(eosBenchSession),
			kgo.RebalanceTimeout(eosBenchSession), kgo.HeartbeatInterval(eosBenchHeartbeat), kgo.FetchMaxWait(eosBenchMaxWait),
			kgo.FetchMaxPartitionBytes(eosBenchPartBytes), kgo.FetchMaxBytes(sdk.DefaultFetchMaxBytes),
			kgo.Balancers(kgo.RangeBalancer(), kgo.RoundRobinBalancer()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MetadataMinAge(250 * time.Millisecond),
			kgo.RetryBackoffFn(func(fails int) time.Duration { return max(retry.Backoff{}.Delay(fails-1), time.Millisecond) })},
		ProduceFailed: func(err error) { b.Errorf("%s: produce: %v", id, err) },
		Ended: func(_ int, ok bool) {
			if ok {
				committed.Add(1)
			} else {
				aborted.Add(1)
			}
		},
	}
	return eosBenchMember{
		run:  job.Run,
		txns: func() (int64, int64) { return committed.Load(), aborted.Load() },
	}
}

// BenchmarkProcessor: exactly-once consume-transform-produce of the whole
// input (eostest.Job) by 1 and by 3 processors in one group, sdk.Processor
// (Run) and franz-go's GroupTransactSession (eostest.KgoJob) with the same
// settings. An iteration runs from making the processors until the
// group's committed offsets reach the input's end; it reports msgs/s,
// txns/s (committed transactions), msgs/txn, aborted/op,
// first-commit-ms (from making the processors to the first offset
// committed: the group join, the producer's initialization and the first
// transaction) and cpu-ns/msg (the test process's CPU time over the same
// span: on a machine the broker shares, what the client takes from it).
func BenchmarkProcessor(b *testing.B) {
	eosBenchFill(b)
	engines := []struct {
		name string
		new  eosBenchEngine
	}{
		{"sdk", eosBenchSDK},
		{"franz-go", eosBenchKgo},
	}
	for _, procs := range []int{1, 3} {
		for _, e := range engines {
			b.Run(fmt.Sprintf("procs=%d/engine=%s", procs, e.name), func(b *testing.B) { eosBenchRun(b, e.name, procs, e.new) })
		}
	}
}

// eosBenchRun runs b.N iterations of procs processors made by newMember.
// The first iteration's output is checked: each input's output once, in
// order per key.
func eosBenchRun(b *testing.B, engine string, procs int, newMember eosBenchEngine) {
	addrs, in, ends, total := eosBenchFill(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	var running, first, cpu time.Duration
	var committed, aborted int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		group := fmt.Sprintf("azkafka-eos-bench-%s-%d", engine, time.Now().UnixNano())
		out := group + "-out"
		createTopic(b, ctx, addrs, out, eosParts)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, procs)
		members := make([]eosBenchMember, procs)
		b.StartTimer()
		start, cpuStart := time.Now(), processCPU()
		for j := range members {
			members[j] = newMember(b, addrs, group, in, out, fmt.Sprintf("%s-%d", group, j))
			go func(m eosBenchMember) { done <- m.run(runCtx) }(members[j])
		}
		firstAt := eosBenchWait(ctx, b, admin, group, in, ends, done)
		running += time.Since(start)
		cpu += processCPU() - cpuStart
		b.StopTimer()
		first += firstAt.Sub(start)
		stop()
		for range procs {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				b.Errorf("a processor's run: %v", err)
			}
		}
		for _, m := range members {
			c, a := m.txns()
			committed += c
			aborted += a
		}
		if i == 0 {
			got, err := eostest.ReadToEnd(ctx, addrs, out, eosParts, true)
			if err != nil {
				b.Fatal(err)
			}
			if err := eostest.Check(got, total, eosKeys); err != nil {
				b.Fatalf("read_committed output of %d messages: %v", total, err)
			}
		}
		if err := eosBenchDeleteTopic(ctx, admin, out); err != nil {
			b.Logf("deleting %s: %v", out, err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(total*b.N)/running.Seconds(), "msgs/s")
	b.ReportMetric(float64(committed)/running.Seconds(), "txns/s")
	b.ReportMetric(float64(total*b.N)/float64(max(committed, 1)), "msgs/txn")
	b.ReportMetric(float64(aborted)/float64(b.N), "aborted/op")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-commit-ms")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(total*b.N), "cpu-ns/msg")
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// eosBenchWait fetches group's committed offsets of topic every
// eosBenchPoll until each partition's is its end offset, and returns when
// the first was committed. A processor's run ending first fails b.
func eosBenchWait(ctx context.Context, b *testing.B, admin *kgo.Client, group, topic string, ends []int64, done <-chan error) (firstAt time.Time) {
	tick := time.NewTicker(eosBenchPoll)
	defer tick.Stop()
	for {
		offsets, err := eosBenchCommitted(ctx, admin, group, topic, len(ends))
		now := time.Now()
		if err != nil && !kerr.IsRetriable(err) {
			b.Fatalf("fetching the committed offsets of group %s: %v", group, err)
		}
		left := 0
		for p, end := range ends {
			if firstAt.IsZero() && offsets[p] > 0 {
				firstAt = now
			}
			if offsets[p] < end {
				left++
			}
		}
		if err == nil && left == 0 {
			return firstAt
		}
		select {
		case err := <-done:
			b.Fatalf("a processor's run ended with %d of %d partitions committed to their end: %v", len(ends)-left, len(ends), err)
		case <-ctx.Done():
			b.Fatalf("%d of %d partitions committed to their end: %v", len(ends)-left, len(ends), ctx.Err())
		case <-tick.C:
		}
	}
}

// eosBenchCommitted returns group's committed offset of each of topic's
// parts partitions (-1: none), the committed transactions' only. The
// offsets are those known on an error.
func eosBenchCommitted(ctx context.Context, cl *kgo.Client, group, topic string, parts int) ([]int64, error) {
	offsets := make([]int64, parts)
	for p := range offsets {
		offsets[p] = -1
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = topic
	for p := range int32(parts) {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return offsets, err
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return offsets, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return offsets, fmt.Errorf("partition %d: %w", p.Partition, err)
				}
				if int(p.Partition) < parts {
					offsets[p.Partition] = p.Offset
				}
			}
		}
	}
	return offsets, nil
}

// eosBenchDeleteTopic deletes topic.
func eosBenchDeleteTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = append(req.TopicNames, topic)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}
