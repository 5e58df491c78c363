//go:build conformance

package conformance

// Exactly once on Kafka 4.3.1: sdk.Processor's consume-transform-produce
// through members closed and restarted while the input is written, and
// sdk.TxnWriter fencing its predecessor; read_committed readers see every
// input's output once, read_uncommitted ones also what was aborted.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/eostest"
	"github.com/azkafka/azkafka/sdk"
)

// eosInput is the input of the exactly-once tests: n messages in parts
// partitions, keys keys.
const eosParts, eosKeys = 6, 97

// startProcessor starts a Processor of group with transactional ID id
// running eostest.Job from in to out; done gets Run's error.
func startProcessor(t *testing.T, ctx context.Context, addrs []string, group, in, out, id string) (*sdk.Processor, chan error) {
	t.Helper()
	p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: addrs, GroupID: group, Topic: in, MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second},
		&kafka.Writer{Topic: out, Balancer: &kafka.Hash{}}, controlsOptions(sdk.WithTransactionalID(id))...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, eostest.Job) }()
	return p, done
}

// TestSDKProcessorMembersComeAndGo: 3 Processors in one group, one of
// them closed and restarted with its transactional ID every 300 ms (20
// times, each a rebalance and an abort of what was open) while 20,000
// messages are written: read_committed sees each input's output once, in
// the input's order per key.
func TestSDKProcessorMembersComeAndGo(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stamp := time.Now().UnixNano()
	in, out, group := fmt.Sprintf("azkafka-eos-in-%d", stamp), fmt.Sprintf("azkafka-eos-out-%d", stamp), fmt.Sprintf("azkafka-eos-%d", stamp)
	createTopic(t, ctx, addrs, in, eosParts)
	createTopic(t, ctx, addrs, out, eosParts)
	const n, restarts = 20000, 20
	written := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 500 {
			if err := eostest.WriteInput(ctx, addrs, in, i, 500, eosKeys); err != nil {
				written <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		written <- nil
	}()
	type member struct {
		p    *sdk.Processor
		done chan error
	}
	members := make([]member, 3)
	for i := range members {
		p, done := startProcessor(t, ctx, addrs, group, in, out, fmt.Sprintf("%s-%d", group, i))
		members[i] = member{p, done}
	}
	defer func() {
		for _, m := range members {
			m.p.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var aborted int64
	for range restarts {
		time.Sleep(300 * time.Millisecond)
		i := rng.IntN(len(members))
		members[i].p.Close()
		if err := <-members[i].done; err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("member %d's Run: %v", i, err)
		}
		aborted += members[i].p.Stats().Aborted["close"]
		p, done := startProcessor(t, ctx, addrs, group, in, out, fmt.Sprintf("%s-%d", group, i))
		members[i] = member{p, done}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	for {
		got, err := eostest.ReadToEnd(ctx, addrs, out, eosParts, true)
		if err != nil {
			t.Fatal(err)
		}
		if eostest.Count(got) >= n {
			if err := eostest.Check(got, n, eosKeys); err != nil {
				t.Fatalf("read_committed output of %d messages: %v", n, err)
			}
			break
		}
		for i, m := range members {
			select {
			case err := <-m.done:
				t.Fatalf("member %d's Run ended: %v", i, err)
			default:
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the output has %d of %d messages", eostest.Count(got), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	all, err := eostest.ReadToEnd(ctx, addrs, out, eosParts, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d inputs, %d restarts (%d transactions aborted by Close): read_committed saw each output once; read_uncommitted %d, %d of them aborted",
		n, restarts, aborted, eostest.Count(all), eostest.Count(all)-n)
}

// TestSDKTxnWriterFenced: a TxnWriter started with the transactional ID
// of one mid-transaction fences it: the first's Commit fails with
// ErrTxnFenced and nothing of its transaction is visible read_committed.
func TestSDKTxnWriterFenced(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-txn-fence-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 1)
	newW := func() *sdk.TxnWriter {
		w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic}, controlsOptions(sdk.WithTransactionalID(topic))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	zombie := newW()
	if err := zombie.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.WriteMessages(ctx, kafka.Message{Value: []byte("out-0")}); err != nil {
		t.Fatal(err)
	}
	next := newW()
	if err := zombie.Commit(ctx); !errors.Is(err, sdk.ErrTxnFenced) {
		t.Fatalf("the fenced writer's Commit: %v, want ErrTxnFenced", err)
	}
	if err := next.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := next.WriteMessages(ctx, kafka.Message{Value: []byte("out-1")}); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := eostest.ReadToEnd(ctx, addrs, topic, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], []string{"out-1"}) {
		t.Errorf("read_committed: %v, want [out-1]", got[0])
	}
	all, err := eostest.ReadToEnd(ctx, addrs, topic, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all[0], "out-0") {
		t.Errorf("read_uncommitted: %v, want the fenced writer's out-0 too", all[0])
	}
}
