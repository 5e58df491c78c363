//go:build conformance

package conformance

// Exactly once through the loss of a transaction coordinator: sdk.Processor
// (eosproc processes) on the 3-node Kafka 4.3.1 cluster while the node
// coordinating one processor's transactions is killed with SIGKILL in the
// middle of a transaction, and processors are killed too.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/eostest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// TestClusterProcessorCoordinatorKilled: 3 eosproc processes (classic
// group) from a 6-partition topic to another, both replicated on the 3
// nodes (min.insync.replicas 2). While the first half of the input is
// written, once a process's transaction is Ongoing at its coordinator
// (DescribeTransactions), the coordinator's node is killed with SIGKILL,
// then 10 times a process (restarted with its transactional ID) while the
// cluster moves the node's leaderships. Once FindCoordinator names another
// node, which describes the transactional ID, the node restarts while the
// second half is written; once a process's transaction is Ongoing, the
// process is killed, then 9 more times a process. read_committed then holds
// each input's output once, in the input's order per key; Kafka's Java
// consumer read_committed reads the same values in the same order;
// read_uncommitted also shows what was aborted. No process may end on its
// own. AZKAFKA_CONFORMANCE_EOS_MESSAGES sets the input's size (default
// 100,000; each half goes on past its share until its kills are done).
func TestClusterProcessorCoordinatorKilled(t *testing.T) {
	inLane(t, &clusterLane)
	t0 := time.Now()
	bin, n := buildEosproc(t), eosMessages(t)
	c := startCluster(t, clusterConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const in, out, group = "eosc-in", "eosc-out", "eosc"
	c.CreateTopic(ctx, in, eosParts)
	c.CreateTopic(ctx, out, eosParts)
	t.Logf("cluster up, topics %s and %s (%d partitions, every replica in sync) in %v", in, out, eosParts, time.Since(t0).Round(time.Millisecond))

	t1 := time.Now()
	e := startEosprocs(t, bin, c.Addrs(), group, in, out, sdk.GroupProtocolClassic, false, 3)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	const kills = 20
	killRestart := func(i int) {
		e.killRestart(i)
		t.Logf("killed and restarted process %d", i)
	}
	killSome := func(k int) {
		for range k {
			time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
			killRestart(rng.IntN(len(e.procs)))
		}
	}

	// Each half goes on with more input until its kills are done: the
	// events it waits for come while input is processed.
	half := n / 2
	enough := make(chan struct{})
	input := writeEosInput(ctx, c.Addrs(), in, 0, half, enough)
	vi, coord := waitTxnOngoing(t, ctx, c, c.LiveAddrs(), e)
	victim := e.id(vi)
	c.Node(int(coord)).Kill9()
	killed := time.Now()
	t.Logf("killed node %d, the transaction coordinator of %s, with its transaction Ongoing", coord, victim)
	killSome(kills / 2)
	close(enough)
	live := c.LiveAddrs()
	next := txnCoordinator(t, ctx, live, victim, coord)
	var state string
	for {
		var err error
		if state, _, err = describeTxn(ctx, c.Node(int(next)).Addrs()[0], victim); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d, the coordinator of %s after node %d, does not describe it: %v (%v)", next, victim, coord, err, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	failover := time.Since(killed)
	t.Logf("node %d coordinates %s %v after the kill (its transaction: %s)", next, victim, failover.Round(time.Millisecond), state)
	first := <-input
	if first.err != nil {
		t.Fatal(first.err)
	}

	// The node restarts meanwhile: nothing else touches its Node until
	// Start returned (live holds the other nodes' addresses).
	var restarts sync.WaitGroup
	var restartErr error
	var back time.Time
	restarts.Go(func() {
		restartErr = c.Node(int(coord)).Start()
		back = time.Now()
	})
	defer restarts.Wait()
	enough = make(chan struct{})
	input = writeEosInput(ctx, live, in, first.n, n-half, enough)
	vi, _ = waitTxnOngoing(t, ctx, c, live, e)
	killRestart(vi)
	killSome(kills/2 - 1)
	close(enough)
	second := <-input
	if second.err != nil {
		t.Fatal(second.err)
	}
	n = first.n + second.n
	restarts.Wait()
	if restartErr != nil {
		t.Fatalf("node %d restart: %v", coord, restartErr)
	}
	t.Logf("node %d answered again %v after the kill", coord, back.Sub(killed).Round(time.Millisecond))

	// Should the output stall, the test keeps time to say what holds it.
	defer func() {
		if t.Failed() {
			logTxnState(t, c, e, in, out, group)
		}
	}()
	deadline, _ := ctx.Deadline()
	outCtx, outCancel := context.WithDeadline(ctx, deadline.Add(-20*time.Second))
	defer outCancel()
	got := waitOutput(t, outCtx, c.Addrs(), out, n)
	processed := time.Since(t1)
	if err := eostest.Check(got, n, eosKeys); err != nil {
		t.Fatalf("read_committed output of %d messages after %d kills of processes and one of a transaction coordinator: %v", n, kills, err)
	}
	for _, s := range e.ended() {
		t.Errorf("%s: it ended on its own", s)
	}
	c.WaitFullISR(ctx, in, out, "__transaction_state", "__consumer_offsets")
	t.Logf("node %d in every ISR again, seen %v after it answered", coord, time.Since(back).Round(time.Millisecond))
	checkJavaAgrees(t, ctx, c.Addrs(), out, got)
	all, err := eostest.ReadToEnd(ctx, c.Addrs(), out, eosParts, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d inputs, %d SIGKILLs of processes and one of node %d, the transaction coordinator of %s (node %d after %v): read_committed saw each output once, in order per key, %v after the processes started; read_uncommitted %d, %d of them aborted; %v in all",
		n, kills, coord, victim, next, failover.Round(time.Millisecond), processed.Round(time.Millisecond), eostest.Count(all), eostest.Count(all)-n, time.Since(t0).Round(time.Millisecond))
}

// waitTxnOngoing asks the nodes at addrs for the coordinators of the
// processes' transactional IDs, and the coordinators for their state,
// until a process's transaction begun since it started is Ongoing (not one
// a killed process left open), and returns the process and the
// coordinator.
func waitTxnOngoing(t *testing.T, ctx context.Context, c *kafkaCluster, addrs []string, e *eosprocs) (int, int32) {
	t.Helper()
	start := time.Now()
	var last string
	for {
		for i, p := range e.procs {
			coord := txnCoordinator(t, ctx, addrs, e.id(i), -1)
			state, began, err := describeTxn(ctx, c.Node(int(coord)).Addrs()[0], e.id(i))
			if err == nil && ongoingSince(state, began, p.started) {
				t.Logf("%s: a transaction Ongoing at node %d after %v", e.id(i), coord, time.Since(start).Round(time.Millisecond))
				return i, coord
			}
			last = fmt.Sprintf("%s at node %d: state %q begun %v, error %v", e.id(i), coord, state, began.Format(time.StampMilli), err)
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for a process's transaction to be Ongoing: %v (last: %s)", ctx.Err(), last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// txnCoordinator asks the nodes at addrs which node coordinates
// transactional ID id until one names a node other than not.
func txnCoordinator(t *testing.T, ctx context.Context, addrs []string, id string, not int32) int32 {
	t.Helper()
	var last error
	for {
		for _, addr := range addrs {
			node, err := findTxnCoordinator(ctx, addr, id)
			if err == nil && node != not {
				return node
			}
			if err == nil {
				err = fmt.Errorf("%s names node %d", addr, node)
			}
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the transaction coordinator of %s: %v (last: %v)", id, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// findTxnCoordinator sends FindCoordinator for transactional ID id to
// addr and returns the node it names.
func findTxnCoordinator(ctx context.Context, addr, id string) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	req.CoordinatorType = 1 // transaction
	req.CoordinatorKeys = []string{id}
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		return 0, err
	}
	cs := resp.(*kmsg.FindCoordinatorResponse).Coordinators
	if len(cs) != 1 {
		return 0, fmt.Errorf("%s: FindCoordinator answered %d coordinators", addr, len(cs))
	}
	if err := kerr.ErrorForCode(cs[0].ErrorCode); err != nil {
		return 0, fmt.Errorf("%s: FindCoordinator: %w", addr, err)
	}
	return cs[0].NodeID, nil
}

// describeTxn returns the state of transactional ID id at the
// coordinator at addr (Empty, Ongoing, PrepareCommit, CompleteCommit...)
// and when its transaction began.
func describeTxn(ctx context.Context, addr, id string) (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		return "", time.Time{}, err
	}
	ss := resp.(*kmsg.DescribeTransactionsResponse).TransactionStates
	if len(ss) != 1 {
		return "", time.Time{}, fmt.Errorf("%s: DescribeTransactions answered %d states", addr, len(ss))
	}
	if err := kerr.ErrorForCode(ss[0].ErrorCode); err != nil {
		return "", time.Time{}, fmt.Errorf("%s: DescribeTransactions: %w", addr, err)
	}
	return strings.TrimSpace(ss[0].State), time.UnixMilli(ss[0].StartTimestamp), nil
}

// logTxnState logs, after a failure, what may hold read_committed readers
// of topic back: each process's transaction as its coordinator describes
// it, and each partition's last stable offset against its end.
func logTxnState(t *testing.T, c *kafkaCluster, e *eosprocs, in, topic, group string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	live := c.LiveAddrs()
	for i := range e.procs {
		id := e.id(i)
		node, err := int32(-1), error(nil)
		for _, addr := range live {
			if node, err = findTxnCoordinator(ctx, addr, id); err == nil {
				break
			}
		}
		if err != nil {
			t.Logf("diagnosis: %s: no coordinator found: %v", id, err)
			continue
		}
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{id}
		resp, err := kproxy.RoundTrip(ctx, c.Node(int(node)).Addrs()[0], "azkafka-conformance", req)
		if err != nil {
			t.Logf("diagnosis: %s at node %d: %v", id, node, err)
			continue
		}
		for _, st := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			var parts []string
			for _, tp := range st.Topics {
				parts = append(parts, fmt.Sprintf("%s%v", tp.Topic, tp.Partitions))
			}
			t.Logf("diagnosis: %s at node %d: state %q (error %v), producer %d epoch %d, begun %v, partitions %v",
				id, node, st.State, kerr.ErrorForCode(st.ErrorCode), st.ProducerID, st.ProducerEpoch,
				time.UnixMilli(st.StartTimestamp).Format(time.StampMilli), parts)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(live...))
	if err != nil {
		t.Logf("diagnosis: %v", err)
		return
	}
	defer cl.Close()
	// The output's last stable offsets and ends, and what the group
	// committed of the input against its end (is input left unread, or
	// was it never written?).
	stable, outEnd := listEnds(t, ctx, cl, topic, 1), listEnds(t, ctx, cl, topic, 0)
	for p := range int32(eosParts) {
		t.Logf("diagnosis: %s[%d]: last stable offset %d, end %d", topic, p, stable[p], outEnd[p])
	}
	committed, err := eosBenchCommitted(ctx, cl, group, in, eosParts)
	if err != nil {
		t.Logf("diagnosis: OffsetFetch of group %s: %v", group, err)
	}
	inEnd := listEnds(t, ctx, cl, in, 0)
	for p := range int32(eosParts) {
		t.Logf("diagnosis: %s[%d]: group %s committed %d, end %d", in, p, group, committed[p], inEnd[p])
	}
}

// listEnds returns the end offset of each of topic's eosParts partitions
// at isolation level (1: the last stable offset), logging what failed.
func listEnds(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, level int8) map[int32]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = level
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(eosParts) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ends := map[int32]int64{}
	for _, sh := range cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			t.Logf("diagnosis: ListOffsets of %s (isolation %d) at node %d: %v", topic, level, sh.Meta.NodeID, sh.Err)
			continue
		}
		for _, rt := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				ends[rp.Partition] = rp.Offset
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Logf("diagnosis: %s[%d] ListOffsets (isolation %d) at node %d: %v", topic, rp.Partition, level, sh.Meta.NodeID, err)
				}
			}
		}
	}
	return ends
}
