//go:build conformance

package conformance

// Broker failover on a 3-node Kafka 4.3.1 cluster through SASL_SSL
// (SCRAM-SHA-512, TLS verified against the test's CA): the idempotent
// sdk.Writer and an sdk.Reader in a group, side by side with a raw
// kafka.Writer on a twin topic, through a kill -9 of the node leading the
// most partitions, its restart, and a controlled shutdown of another node.

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/testpki"
	"github.com/azkafka/azkafka/sdk"
)

// failoverCall is one WriteMessages call of a failover producer.
type failoverCall struct {
	partition  int
	start, end time.Time
	values     []string
	err        error
}

// failoverProducer writes, for every partition, calls of numbered messages
// to that partition alone, one call after another (one goroutine per
// partition), until stopped, and records every call. A partition whose
// leader moved stalls on its own, so the stall is measured per partition.
type failoverProducer struct {
	name  string
	write func(context.Context, ...kafka.Message) error
	mu    sync.Mutex
	calls []failoverCall
	acked atomic.Int64
	stop  atomic.Bool
}

// keyPartition routes a message to the partition its key names: "p07-...".
type keyPartition struct{}

func (keyPartition) Balance(msg kafka.Message, _ ...int) int {
	n, _ := strconv.Atoi(string(msg.Key[1:3]))
	return n
}

// run writes to partition part until stop is set; the call in flight then
// ends as any other.
func (p *failoverProducer) run(ctx context.Context, part, perCall int) {
	for i := 0; !p.stop.Load() && ctx.Err() == nil; i++ {
		msgs := make([]kafka.Message, perCall)
		values := make([]string, perCall)
		for j := range msgs {
			v := fmt.Sprintf("p%02d-%s-%07d", part, p.name, i*perCall+j)
			msgs[j], values[j] = kafka.Message{Key: []byte(v), Value: []byte(v)}, v
		}
		start := time.Now()
		err := p.write(ctx, msgs...)
		p.mu.Lock()
		p.calls = append(p.calls, failoverCall{partition: part, start: start, end: time.Now(), values: values, err: err})
		p.mu.Unlock()
		if err == nil {
			p.acked.Add(int64(perCall))
		}
	}
}

// writtenSince reports whether every partition of parts had a successful
// call that started at or after t.
func (p *failoverProducer) writtenSince(t time.Time, parts []int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := map[int]bool{}
	for _, c := range p.calls {
		if c.err == nil && !c.start.Before(t) {
			done[c.partition] = true
		}
	}
	for _, part := range parts {
		if !done[part] {
			return false
		}
	}
	return true
}

// callsBetween returns how many successful calls ended within [from, to]
// and the p50 and p99 of their durations.
func (p *failoverProducer) callsBetween(from, to time.Time) (int, time.Duration, time.Duration) {
	p.mu.Lock()
	var ds []time.Duration
	for _, c := range p.calls {
		if c.err == nil && !c.end.Before(from) && !c.end.After(to) {
			ds = append(ds, c.end.Sub(c.start))
		}
	}
	p.mu.Unlock()
	return len(ds), percentile(ds, 0.5), percentile(ds, 0.99)
}

// waitUntil polls cond every 20 ms until it holds; it returns false when
// budget ends first.
func waitUntil(budget time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(budget)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// failoverEvent is a broker event and the partitions whose leader it moved.
type failoverEvent struct {
	name  string
	at    time.Time        // the event
	moved time.Time        // when no partition was led by the node any more
	parts map[string][]int // topic → partitions led by the node before
}

// stalls returns, for each partition the event moved in topic, its
// stall: the longest time without an acknowledged write between the event
// and the end of the first successful call that started once the leaders
// had moved. After a kill that is the time from the event to that call's
// end; after a controlled shutdown, whose leaders move seconds after the
// signal while the node still serves, it is the gap around the move (the
// time from the event to the next acknowledgement would count the call in
// flight at the signal instead). Partitions with no such call are counted
// in missing.
func stalls(p *failoverProducer, ev failoverEvent, topic string) (ds []time.Duration, missing int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range ev.parts[topic] {
		last, longest, found := ev.at, time.Duration(0), false
		// A partition's calls are appended in the order they ended: one
		// goroutine writes each partition, one call after another.
		for _, c := range p.calls {
			if c.partition != part || c.err != nil || !c.end.After(ev.at) {
				continue
			}
			longest, last = max(longest, c.end.Sub(last)), c.end
			if !c.start.Before(ev.moved) {
				found = true
				break
			}
		}
		if found {
			ds = append(ds, longest)
		} else {
			missing++
		}
	}
	return ds, missing
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

// secureCluster is the 3-node cluster with a SASL_SSL listener: the
// client TLS config trusting its CA, SCRAM-SHA-512 user alice.
type secureCluster struct {
	c     *kafkaCluster
	tls   *tls.Config
	mech  sasl.Mechanism
	pass  string
	addrs []string // the SASL_SSL listeners
}

// startSecureCluster starts it, with extra lines in every node's config.
func startSecureCluster(t *testing.T, extra ...string) secureCluster {
	t.Helper()
	ca := testpki.NewCA(t, "azkafka cluster test CA")
	keystore := writeKeystore(t, t.TempDir(), "broker", ca.ValidServer(t))
	pw := map[string]string{"alice": "alice-" + randomToken(t)}
	c := startCluster(t, clusterConfig{
		ports:      []string{"SASL_SSL_PORT"},
		formatArgs: scramUsers(pw),
		extra: func(int) []string {
			return append(saslSSLListeners(map[string]string{"SASL_SSL": keystore}), extra...)
		},
	})
	mech, err := scram.Mechanism(scram.SHA512, "alice", pw["alice"])
	if err != nil {
		t.Fatal(err)
	}
	return secureCluster{c: c, tls: ca.ClientConfig(), mech: mech, pass: pw["alice"], addrs: c.NamedAddrs("SASL_SSL_PORT")}
}

// TestClusterFailover: 12 partitions replicated 3 times (min.insync.replicas
// 2, acks=all), Kafka's default broker session timeout (9 s). The
// idempotent sdk.Writer with its default delivery settings (per partition,
// sync calls of 4 messages one after another) and an sdk.Reader in a group
// run through SASL_SSL while the node leading the most partitions is
// killed with SIGKILL, restarted once the others lead, and then another
// node is stopped with a controlled shutdown (SIGTERM). The SDK side must
// return no error to the caller, lose nothing, store nothing twice, keep
// the order of the calls in every partition, surface no error to the
// consumer and end with the group committed at every partition's end. A raw
// kafka.Writer on a twin topic, through the same events, is the control:
// its failures, losses and duplicates are recorded, not judged. The
// produce stall per election (from the event to the first acknowledged
// write on a moved partition) is measured for both.
func TestClusterFailover(t *testing.T) {
	inLane(t, &clusterLane)
	// Kafka's default broker heartbeat and session timeout (the cluster
	// template shortens them): a killed leader keeps its partitions for
	// 9 s before the controller fences it.
	sc := startSecureCluster(t, "broker.heartbeat.interval.ms=2000", "broker.session.timeout.ms=9000")
	c, trusted, mech, secure := sc.c, sc.tls, sc.mech, sc.addrs
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const partitions = 12
	sdkTopic, rawTopic, group := "failover-sdk", "failover-raw", "failover-group"
	c.CreateTopic(ctx, sdkTopic, partitions)
	c.CreateTopic(ctx, rawTopic, partitions)

	tr, err := sdk.NewTransport(&kafka.Transport{TLS: trusted, SASL: mech}, sdkcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	// The Writer's delivery settings are the defaults (a budget of 110 s):
	// no write may fail through a 9 s election.
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(secure...), Topic: sdkTopic, RequiredAcks: kafka.RequireAll,
		Balancer: keyPartition{}, BatchTimeout: 5 * time.Millisecond, Transport: tr},
		sdk.WithAZ("az-a"), sdk.WithLogger(slog.New(slog.DiscardHandler)), sdk.WithGetenv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rawTr := &kafka.Transport{TLS: trusted, SASL: mech}
	defer rawTr.CloseIdleConnections()
	raw := &kafka.Writer{Addr: kafka.TCP(secure...), Topic: rawTopic, RequiredAcks: kafka.RequireAll,
		Balancer: keyPartition{}, BatchTimeout: 5 * time.Millisecond, Transport: rawTr}
	defer raw.Close()

	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: secure, GroupID: group, Topic: sdkTopic,
		Dialer:      &kafka.Dialer{Timeout: 10 * time.Second, TLS: trusted, SASLMechanism: mech},
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond}, sdkcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	ends := make(chan map[int]int64, 1)
	consumed := make(chan error, 1)
	go func() { consumed <- deliverytest.ConsumeToEnd(ctx, r, 0, ends, seen) }()

	sdkP := &failoverProducer{name: "sdk", write: w.WriteMessages}
	rawP := &failoverProducer{name: "raw", write: raw.WriteMessages}
	var wg sync.WaitGroup
	for _, p := range []*failoverProducer{sdkP, rawP} {
		for part := range partitions {
			wg.Add(1)
			go func() { defer wg.Done(); p.run(ctx, part, 4) }()
		}
	}
	stopProducers := func() {
		sdkP.stop.Store(true)
		rawP.stop.Store(true)
		wg.Wait()
	}
	defer stopProducers()

	const hang = 3 * time.Minute // a hang detector, several times the expected time
	if !waitUntil(hang, func() bool { return sdkP.acked.Load() >= 1000 }) {
		t.Fatalf("the sdk Writer acknowledged %d messages in %v", sdkP.acked.Load(), hang)
	}
	// The steady state before the first event: calls of each Writer
	// (per partition, one after another) and how long they took.
	steadyFrom := time.Now()
	waitUntil(hang, func() bool { return sdkP.acked.Load() >= 3000 })
	steadyTo := time.Now()
	for _, p := range []*failoverProducer{sdkP, rawP} {
		n, p50, p99 := p.callsBetween(steadyFrom, steadyTo)
		t.Logf("steady state, %s: %d calls of 4 in %v (%.0f messages/s), call p50 %v, p99 %v", p.name, n,
			steadyTo.Sub(steadyFrom).Round(time.Millisecond), float64(4*n)/steadyTo.Sub(steadyFrom).Seconds(), p50, p99)
	}
	var events []failoverEvent
	// event moves node id's leaderships with act, then waits until no
	// partition is led by it and both Writers have written again.
	event := func(name string, id int, act func()) {
		t.Helper()
		ev := failoverEvent{name: name, parts: map[string][]int{}}
		for _, topic := range []string{sdkTopic, rawTopic} {
			for part, leader := range c.Leaders(ctx, topic) {
				if leader == id {
					ev.parts[topic] = append(ev.parts[topic], part)
				}
			}
			sort.Ints(ev.parts[topic])
		}
		ev.at = time.Now()
		act()
		c.WaitLeadersOff(ctx, id, sdkTopic, rawTopic)
		moved := time.Now()
		ev.moved = moved
		if !waitUntil(hang, func() bool { return sdkP.writtenSince(moved, ev.parts[sdkTopic]) }) {
			t.Fatalf("%s: a partition it moved got no acknowledged sdk write in %v after the leaders moved", name, hang)
		}
		if !waitUntil(hang, func() bool { return rawP.writtenSince(moved, ev.parts[rawTopic]) }) {
			t.Logf("%s: a partition it moved got no acknowledged raw write in %v after the leaders moved (control: recorded)", name, hang)
		}
		t.Logf("%s of node %d: partitions it led %v (sdk topic), %v (raw topic); leaders moved after %v",
			name, id, ev.parts[sdkTopic], ev.parts[rawTopic], moved.Sub(ev.at).Round(time.Millisecond))
		events = append(events, ev)
	}
	mostLeading := func(except int) int {
		count := map[int]int{}
		for _, leader := range c.Leaders(ctx, sdkTopic) {
			count[leader]++
		}
		best := 0
		for id := 1; id <= len(clusterRacks); id++ {
			if id != except && (best == 0 || count[id] > count[best]) {
				best = id
			}
		}
		return best
	}

	victim := mostLeading(0)
	event("kill -9", victim, c.Node(victim).Kill9)
	c.Node(victim).Restart()
	c.WaitFullISR(ctx, sdkTopic, rawTopic)
	t.Logf("node %d restarted and back in every ISR", victim)
	second := mostLeading(victim)
	event("controlled shutdown", second, func() { c.Node(second).Terminate(2 * time.Minute) })
	stopProducers()

	check := func(topic string) deliverytest.Topic {
		return deliverytest.Topic{Addrs: c.LiveAddrs(), Name: topic, Partitions: partitions}
	}
	ends <- deliverytest.EndOffsets(ctx, t, check(sdkTopic))
	if err := <-consumed; err != nil {
		t.Fatalf("the sdk Reader surfaced an error: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("closing the sdk Reader: %v", err)
	}
	deliverytest.RequireCommittedToEnd(ctx, t, check(sdkTopic), group)

	type outcome struct {
		acked, failed, lost, dups, reorders, misplaced, unseen int
	}
	judge := func(p *failoverProducer, topic string) outcome {
		parts := deliverytest.PartitionValues(ctx, t, check(topic))
		var o outcome
		counts := map[string]int{}
		for part, vals := range parts {
			for _, v := range vals {
				counts[v]++
				if !strings.HasPrefix(v, fmt.Sprintf("p%02d-", part)) {
					o.misplaced++
				}
			}
		}
		p.mu.Lock()
		for _, call := range p.calls {
			if call.err != nil {
				o.failed += len(call.values)
				continue
			}
			o.acked += len(call.values)
			for _, v := range call.values {
				if counts[v] == 0 {
					o.lost++
				}
			}
		}
		p.mu.Unlock()
		for _, n := range counts {
			if n > 1 {
				o.dups += n - 1
			}
		}
		o.reorders = reorders(parts, func(int) int { return 0 })
		for v := range counts {
			if topic == sdkTopic && seen[v] == 0 {
				o.unseen++
			}
		}
		return o
	}
	so, ro := judge(sdkP, sdkTopic), judge(rawP, rawTopic)
	st := w.Stats().SDK
	t.Logf("sdk.Writer (idempotent, producer ID %d, epoch %d): %d acknowledged, %d failed, %d lost, %d duplicates, %d out of order, %d in another partition; %d produce requests resent; the Reader saw every stored message but %d",
		st.ProducerID, st.ProducerEpoch, so.acked, so.failed, so.lost, so.dups, so.reorders, so.misplaced, st.Retries, so.unseen)
	t.Logf("raw kafka.Writer (control): %d acknowledged, %d failed, %d lost, %d duplicates, %d out of order, %d in another partition",
		ro.acked, ro.failed, ro.lost, ro.dups, ro.reorders, ro.misplaced)
	var table strings.Builder
	for _, ev := range events {
		for _, side := range []struct {
			name  string
			p     *failoverProducer
			topic string
			o     outcome
		}{{"sdk.Writer", sdkP, sdkTopic, so}, {"raw kafka.Writer", rawP, rawTopic, ro}} {
			ds, missing := stalls(side.p, ev, side.topic)
			fmt.Fprintf(&table, "\n  %-20s %-17s moved %2d partitions: stall p50 %-8v p99 %-8v (no acknowledged write: %d)",
				ev.name, side.name, len(ev.parts[side.topic]), percentile(ds, 0.5).Round(time.Millisecond), percentile(ds, 0.99).Round(time.Millisecond), missing)
		}
	}
	t.Logf("produce stall per event, the longest time without an acknowledged write on a partition it moved, from the event to the first acknowledged call started after the move:%s", table.String())

	if so.failed != 0 || so.lost != 0 || so.dups != 0 || so.reorders != 0 || so.misplaced != 0 || so.unseen != 0 {
		t.Fatalf("sdk: %d failed, %d lost, %d duplicates, %d out of order, %d in another partition, %d stored but not read",
			so.failed, so.lost, so.dups, so.reorders, so.misplaced, so.unseen)
	}
	for _, ev := range events {
		if len(ev.parts[sdkTopic]) == 0 {
			t.Fatalf("%s moved no partition of the sdk topic: the event proved nothing", ev.name)
		}
		if _, missing := stalls(sdkP, ev, sdkTopic); missing != 0 {
			t.Fatalf("%s: %d moved partitions got no acknowledged sdk write afterwards", ev.name, missing)
		}
	}
	if ro.acked == 0 {
		t.Fatal("the raw control wrote nothing")
	}
}
