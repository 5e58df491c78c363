package sdk_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/eostest"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/sdk"
)

// readToEnd is eostest.ReadToEnd on c, failing t on an error.
func readToEnd(t *testing.T, c *embedded.Cluster, topic string, parts int, committed bool) map[int32][]string {
	t.Helper()
	got, err := eostest.ReadToEnd(testCtx(t), c.Addrs(), topic, parts, committed)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// all is every value of byPartition, sorted.
func all(byPartition map[int32][]string) []string {
	var out []string
	for _, vs := range byPartition {
		out = append(out, vs...)
	}
	slices.Sort(out)
	return out
}

// TestTxnWriter: what WriteMessages calls write between Begin and Commit,
// to two topics, becomes visible to read_committed readers together; what
// an aborted transaction wrote never does (read_uncommitted shows it).
func TestTxnWriter(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("txn-a", 2), embedded.Topic("txn-b", 1))
	mp := metricstest.New()
	w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "txn-a", Balancer: &kafka.Hash{}},
		testOptions(t, sdk.WithTransactionalID("txn-writer"), sdk.WithMetrics(mp))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := testCtx(t)
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("x")}); !errors.Is(err, sdk.ErrNoTxn) {
		t.Errorf("WriteMessages outside a transaction: %v, want ErrNoTxn", err)
	}
	if err := w.Commit(ctx); !errors.Is(err, sdk.ErrNoTxn) {
		t.Errorf("Commit outside a transaction: %v, want ErrNoTxn", err)
	}
	for _, txn := range []struct {
		name   string
		commit bool
	}{{"t1", true}, {"t2", false}, {"t3", true}} {
		if err := w.Begin(); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := w.WriteMessages(ctx,
				kafka.Message{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "%s-a-%d", txn.name, i)},
				kafka.Message{Topic: "txn-b", Value: fmt.Appendf(nil, "%s-b-%d", txn.name, i)}); err != nil {
				t.Fatal(err)
			}
		}
		end := w.Abort
		if txn.commit {
			end = w.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatalf("%s: %v", txn.name, err)
		}
	}
	st := w.Stats()
	if st.Begun != 3 || st.Committed != 2 || st.Aborted["abort"] != 1 || st.Open || st.Duration.Count != 3 {
		t.Errorf("stats %+v, want 3 begun, 2 committed, 1 aborted by abort, none open", st)
	}
	rec := mp.Only(t)
	if id := rec.Client().TransactionalID; id != "txn-writer" {
		t.Errorf("the Recorder's client has transactional ID %q, want txn-writer", id)
	}
	if got := rec.Counts(); got["txn begun"] != 3 || got["txn committed"] != 2 || got["txn abort"] != 1 || got["txn ended"] != 3 || got["txn ns"] <= 0 {
		t.Errorf("Recorder counts %v, want 3 begun, 2 committed, 1 abort, 3 ended with their durations", got)
	}
	for _, topic := range []struct {
		name  string
		parts int
	}{{"txn-a", 2}, {"txn-b", 1}} {
		var want, wantAll []string
		for _, name := range []string{"t1", "t2", "t3"} {
			for i := range 5 {
				v := fmt.Sprintf("%s-%s-%d", name, topic.name[len(topic.name)-1:], i)
				wantAll = append(wantAll, v)
				if name != "t2" {
					want = append(want, v)
				}
			}
		}
		slices.Sort(want)
		slices.Sort(wantAll)
		if got := all(readToEnd(t, c, topic.name, topic.parts, true)); !slices.Equal(got, want) {
			t.Errorf("%s read_committed: %v, want %v", topic.name, got, want)
		}
		if got := all(readToEnd(t, c, topic.name, topic.parts, false)); !slices.Equal(got, wantAll) {
			t.Errorf("%s read_uncommitted: %v, want %v (the aborted ones too)", topic.name, got, wantAll)
		}
	}
}

// TestTxnWriterRefusals: the configurations a TxnWriter cannot serve are
// errors naming the fix.
func TestTxnWriterRefusals(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("txn-refuse", 1))
	for _, tc := range []struct {
		name string
		w    *kafka.Writer
		opts []sdk.Option
		want string
	}{
		{"no transactional ID", &kafka.Writer{Addr: kafka.TCP(c.Addrs()...)}, nil, "AZKAFKA_TRANSACTIONAL_ID"},
		{"async", &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Async: true}, []sdk.Option{sdk.WithTransactionalID("a")}, "Async"},
		{"no address", &kafka.Writer{}, []sdk.Option{sdk.WithTransactionalID("a")}, "Addr is nil"},
		{"bad ID", &kafka.Writer{Addr: kafka.TCP(c.Addrs()...)}, []sdk.Option{sdk.WithTransactionalID("a b")}, "WithTransactionalID"},
		{"timeout", &kafka.Writer{Addr: kafka.TCP(c.Addrs()...)}, []sdk.Option{sdk.WithTransactionalID("a"), sdk.WithTransactionTimeout(-1)}, "WithTransactionTimeout"},
	} {
		w, err := sdk.NewTxnWriter(tc.w, testOptions(t, tc.opts...)...)
		if err == nil {
			w.Close()
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sdk: NewTxnWriter") {
			t.Errorf("%s: %v, want an error of NewTxnWriter naming %s", tc.name, err, tc.want)
		}
	}
	if _, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "txn-refuse"}, testOptions(t, sdk.WithTransactionalID("a"))...); err == nil ||
		!strings.Contains(err.Error(), "WithTransactionalID") {
		t.Errorf("NewReader with WithTransactionalID: %v, want a refusal naming the option", err)
	}
}

// TestTxnWriterFenced: a second TxnWriter with the same transactional ID
// fences the first: the first's Commit fails with ErrTxnFenced and
// nothing of its transaction is visible; the second's commits.
func TestTxnWriterFenced(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("txn-fence", 1))
	newW := func() *sdk.TxnWriter {
		w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "txn-fence"},
			testOptions(t, sdk.WithTransactionalID("fenced"))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	ctx := testCtx(t)
	zombie := newW()
	if err := zombie.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.WriteMessages(ctx, kafka.Message{Value: []byte("zombie")}); err != nil {
		t.Fatal(err)
	}
	next := newW() // InitProducerID fences the zombie and aborts its transaction
	if err := zombie.Commit(ctx); !errors.Is(err, sdk.ErrTxnFenced) {
		t.Fatalf("the fenced writer's Commit: %v, want ErrTxnFenced", err)
	}
	if err := next.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := next.WriteMessages(ctx, kafka.Message{Value: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Kafka aborts the zombie's open transaction when the next producer
	// initializes (the conformance suite checks that nothing of it is
	// visible); the embedded broker only bumps the epoch, so its data
	// may be committed with the next transaction of the same producer
	// ID: only next's own message is checked here.
	if got := all(readToEnd(t, c, "txn-fence", 1, true)); !slices.Contains(got, "next") {
		t.Errorf("read_committed: %v, want next's message", got)
	}
	if st := zombie.Stats(); st.Aborted["fenced"] != 1 {
		t.Errorf("the zombie's stats %+v, want 1 aborted as fenced", st)
	}
}

// TestProcessorRefusals: the configurations a Processor cannot serve are
// errors naming the field. (Its exactly-once proofs run on Kafka 4.3.1, in
// the conformance suite: the embedded broker stops answering under a
// transactional group session, driven by the SDK or by the engine alone.)
func TestProcessorRefusals(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("proc-refuse", 1))
	out := &kafka.Writer{Topic: "proc-out"}
	for _, tc := range []struct {
		name string
		in   kafka.ReaderConfig
		out  *kafka.Writer
		want string
	}{
		{"no group", kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "proc-refuse"}, out, "GroupID is empty"},
		{"no topic", kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "g"}, out, "no Topic nor GroupTopics"},
		{"balancer", kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "g", Topic: "proc-refuse",
			GroupBalancers: []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{}}}, out, "is not supported by a Processor"},
		{"async", kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "g", Topic: "proc-refuse"}, &kafka.Writer{Async: true}, "Async"},
		{"no address", kafka.ReaderConfig{GroupID: "g", Topic: "proc-refuse"}, out, "Addr is nil"},
	} {
		p, err := sdk.NewProcessor(tc.in, tc.out, testOptions(t)...)
		if err == nil {
			p.Close()
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sdk: NewProcessor") {
			t.Errorf("%s: %v, want an error of NewProcessor naming %s", tc.name, err, tc.want)
		}
	}
}

// TestHashPartition: the transactional producer's kafka.Hash partitions
// as kafka-go's kafka.Hash does, for keys of every length up to 40 bytes
// and 1 to 64 partitions.
func TestHashPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	h := &kafka.Hash{}
	for range 20000 {
		key := make([]byte, rng.IntN(41))
		for i := range key {
			key[i] = byte(rng.UintN(256))
		}
		n := 1 + rng.IntN(64)
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		if got, want := sdk.HashPartition(key, n), h.Balance(kafka.Message{Key: key}, parts...); got != want {
			t.Fatalf("key %x among %d: partition %d, kafka.Hash %d", key, n, got, want)
		}
	}
}
