//go:build conformance

package conformance

// Fetch-from-follower (KIP-392) on the 3-node Kafka 4.3.1 cluster with
// racks, whose brokers run RackAwareReplicaSelector: an sdk.Reader in az-b
// reads a topic led entirely in az-a from the az-b replica, in a group and
// on one partition; raw kafka-go's Reader, which negotiates Fetch v10 at
// most and sends no rack, reads the same topic from the leader (the
// control); and an sdk.Reader goes on reading through a kill -9 of its
// in-zone follower.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/sdk"
)

// fffRead is what one reader read of the topic, by (partition, offset).
type fffRead struct {
	seen      map[int][]bool // partition → offset → read
	distinct  int
	dups      int
	misplaced int         // a value naming another partition
	at        []time.Time // when each distinct message arrived
	start     time.Time
	end       time.Time // when the read ended, complete or not
}

// missingPerPartition counts, per partition, the offsets below the end
// offset that were not read.
func (rd *fffRead) missingPerPartition() map[int]int {
	out := map[int]int{}
	for p, offs := range rd.seen {
		for _, ok := range offs {
			if !ok {
				out[p]++
			}
		}
	}
	return out
}

// maxGap is the largest time between consecutive messages that arrived
// at or after from (from itself counts as the first, and the end of the
// read as the last), and when it ended.
func (rd *fffRead) maxGap(from time.Time) (gap time.Duration, end time.Time) {
	prev := from
	for _, at := range append(rd.at[:len(rd.at):len(rd.at)], rd.end) {
		if at.Before(from) {
			continue
		}
		if d := at.Sub(prev); d > gap {
			gap, end = d, at
		}
		prev = at
	}
	return gap, end
}

// fffConsume reads r until every offset below ends[p] of every partition
// in ends was read once, or ctx ends. onMessage runs after each message
// read for the first time, with the count so far and the number of
// partitions that delivered one.
func fffConsume(ctx context.Context, r deliverytest.Consumer, ends map[int]int64, onMessage func(read, partitions int)) (*fffRead, error) {
	rd := &fffRead{seen: map[int][]bool{}, start: time.Now()}
	defer func() { rd.end = time.Now() }()
	want := 0
	for p, end := range ends {
		rd.seen[p] = make([]bool, end)
		want += int(end)
	}
	delivered := map[int]bool{}
	for rd.distinct < want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return rd, fmt.Errorf("after %d of %d messages in %v: %w", rd.distinct, want, time.Since(rd.start).Round(time.Millisecond), err)
		}
		offs, ok := rd.seen[m.Partition]
		if !ok || m.Offset < 0 || m.Offset >= int64(len(offs)) {
			return rd, fmt.Errorf("message at partition %d offset %d: beyond the end offsets %v", m.Partition, m.Offset, ends)
		}
		if offs[m.Offset] {
			rd.dups++
			continue
		}
		offs[m.Offset] = true
		rd.distinct++
		rd.at = append(rd.at, time.Now())
		if !strings.HasPrefix(string(m.Value), fmt.Sprintf("p%02d-", m.Partition)) {
			rd.misplaced++
		}
		delivered[m.Partition] = true
		if onMessage != nil {
			onMessage(rd.distinct, len(delivered))
		}
	}
	return rd, nil
}

// fffFetch is a Reader's fetch bytes by node ID, from Stats().SDK.
type fffFetch struct {
	total, inZone int64
	bytes         map[int32]int64
	batches       map[int32]int64
	brokers       map[int32]sdk.BrokerFetch
}

func fffFetchOf(st sdk.SDKStats) fffFetch {
	f := fffFetch{total: st.FetchBytes, inZone: st.FetchBytesInZone,
		bytes: map[int32]int64{}, batches: map[int32]int64{}, brokers: map[int32]sdk.BrokerFetch{}}
	for _, b := range st.FetchBrokers {
		f.bytes[b.NodeID] += b.Bytes
		f.batches[b.NodeID] += b.Batches
		f.brokers[b.NodeID] = b
	}
	return f
}

// minus is what was fetched between prev and f.
func (f fffFetch) minus(prev fffFetch) fffFetch {
	d := fffFetch{total: f.total - prev.total, inZone: f.inZone - prev.inZone,
		bytes: map[int32]int64{}, batches: map[int32]int64{}, brokers: f.brokers}
	for id, n := range f.bytes {
		d.bytes[id] = n - prev.bytes[id]
		d.batches[id] = f.batches[id] - prev.batches[id]
	}
	return d
}

func (f fffFetch) cross() int64 { return f.total - f.inZone }

func (f fffFetch) String() string {
	ids := make([]int, 0, len(f.bytes))
	for id := range f.bytes {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	var b strings.Builder
	for _, id := range ids {
		bf := f.brokers[int32(id)]
		fmt.Fprintf(&b, "node %d (%s, %s, in zone %v) %d B in %d batches; ", id, bf.Rack, bf.Addr, bf.InZone, f.bytes[int32(id)], f.batches[int32(id)])
	}
	fmt.Fprintf(&b, "total %d B, in zone %d B (%s)", f.total, f.inZone, share(f.inZone, f.total))
	return b.String()
}

func share(part, total int64) string {
	if total == 0 {
		return "no bytes"
	}
	return fmt.Sprintf("%.2f%%", float64(part)*100/float64(total))
}

// fffSettle follows a Reader's fetch stats while it reads: it is settled
// once the in-zone node served fetch bytes and every partition delivered a
// message, by then every partition has been fetched and, the leader
// answering a fetch with rack az-b with the az-b replica and no records,
// redirected.
type fffSettle struct {
	stats      func() sdk.SDKStats
	inZoneNode int32
	partitions int
	settled    *fffFetch
	settledAt  int // messages read when settled
}

func (s *fffSettle) onMessage(read, partitions int) {
	if s.settled != nil || partitions < s.partitions || read%200 != 0 {
		return
	}
	f := fffFetchOf(s.stats())
	if f.bytes[s.inZoneNode] > 0 {
		s.settled, s.settledAt = &f, read
	}
}

// TestClusterFetchFromFollower: 6 partitions replicated on all three nodes,
// every one led by node 1 (az-a), 60 000 messages of 1 KiB. Read in full,
// each by (partition, offset), nothing lost, by:
//   - raw kafka-go's Reader in a group, its bytes per rack counted on its
//     connections (the control: it reads from the leader; recorded, not
//     judged);
//   - an sdk.Reader in az-b in a group, and one on partition 1 alone: at
//     least 95% of the fetch bytes from node 2 (az-b) by Stats().SDK, and
//     none from another zone once settled (the in-zone follower served
//     bytes and every partition delivered a message);
//   - an sdk.Reader in az-b in a group whose coordinator is not node 2,
//     paused once it reads every partition from node 2 (its in-zone
//     follower, leading nothing; by Assignment, from a third of the
//     messages on) and resumed once node 2 is killed with SIGKILL: it must
//     read everything within the deadline; the longest pause between two
//     messages after the kill and the durations are recorded.
func TestClusterFetchFromFollower(t *testing.T) {
	inLane(t, &clusterLane)
	c := startCluster(t, clusterConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const topic, partitions, n, size = "fff", 6, 60000, 1024
	const zone, inZoneNode = "az-b", 2
	assign := make([][]int, partitions)
	for p := range assign {
		assign[p] = []int{1, 2, 3}
		if p%2 == 1 {
			assign[p] = []int{1, 3, 2}
		}
	}
	t0 := time.Now()
	c.CreateTopicAssigned(ctx, topic, assign)
	t.Logf("topic %s: %d partitions, replicas %v, every leader node 1 (az-a), every replica in sync, after %v", topic, partitions, assign, time.Since(t0).Round(time.Millisecond))

	// Produce n messages, n/partitions to each partition, acks=all: every
	// replica holds each one when it is acknowledged. kgo's producer
	// pipelines batches (kafka-go's Writer sends one per partition at a
	// time), in batches of at most 128 KiB, near kafka-go's 100 messages.
	t0 = time.Now()
	p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(128<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	// Random values: what crosses the network is the payload, whatever
	// the compression.
	rnd := rand.New(rand.NewChaCha8([32]byte{}))
	var produced sync.WaitGroup
	var produceErr atomic.Pointer[error]
	for i := range n {
		k := fmt.Sprintf("p%02d-%07d", i%partitions, i)
		v := randomBytes(rnd, size)
		copy(v, k+"-")
		produced.Add(1)
		p.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(k), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr.CompareAndSwap(nil, &err)
			}
			produced.Done()
		})
	}
	produced.Wait()
	p.Close()
	if err := produceErr.Load(); err != nil {
		t.Fatalf("producing: %v", *err)
	}
	check := deliverytest.Topic{Addrs: c.LiveAddrs(), Name: topic, Partitions: partitions}
	ends := deliverytest.EndOffsets(ctx, t, check)
	var stored int64
	for _, e := range ends {
		stored += e
	}
	if stored != n {
		t.Fatalf("end offsets %v: %d messages stored, want %d", ends, stored, n)
	}
	c.WaitFullISR(ctx, topic)
	t.Logf("produced %d messages of %d B (acks=all) in %v; end offsets %v", n, size, time.Since(t0).Round(time.Millisecond), ends)

	rackOf := map[string]string{}
	for i, b := range c.nodes {
		rackOf[b.Addrs()[0]] = clusterRacks[i]
	}
	payload := int64(n * size)
	judgeRead := func(name string, rd *fffRead, err error, want int) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v (missing per partition: %v)", name, err, rd.missingPerPartition())
		}
		if rd.distinct != want || rd.misplaced != 0 {
			t.Fatalf("%s: read %d of %d, %d in another partition", name, rd.distinct, want, rd.misplaced)
		}
	}

	// The control: raw kafka-go, in its own group, from the leader.
	t0 = time.Now()
	rc := deliverytest.NewRackCounter(rackOf)
	raw := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "fff-control", Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond,
		Dialer: &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: rc.Dial}})
	rd, err := fffConsume(ctx, raw, ends, nil)
	_ = raw.Close()
	judgeRead("raw kafka-go Reader (control)", rd, err, n)
	_, cross, _, totalIn := crossZone(rc, zone)
	t.Logf("raw kafka-go Reader in a group (control; zones seen from a client in %s): read all %d messages, %d duplicates, in %v; bytes read per rack on its connections %v: from other zones than %s %d of %d (%s; %.1f MB per 100 MB consumed)",
		zone, rd.distinct, rd.dups, time.Since(t0).Round(time.Millisecond), rc.Read(), zone, cross, totalIn, share(cross, totalIn), perHundredMB(cross, payload))

	// sdkReader reads ends with an sdk.Reader in az-b and judges its fetch
	// bytes.
	sdkReader := func(name string, cfg kafka.ReaderConfig, ends map[int]int64) {
		t.Helper()
		want := 0
		for _, e := range ends {
			want += int(e)
		}
		t0 := time.Now()
		wire := deliverytest.NewRackCounter(rackOf)
		cfg.Brokers, cfg.Topic, cfg.MaxWait = c.Addrs(), topic, 200*time.Millisecond
		cfg.Dialer = &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: wire.Dial}
		r, err := sdk.NewReader(cfg, append(sdkcOptions(), sdk.WithAZ(zone), sdk.WithFetchFromFollower(true))...)
		if err != nil {
			t.Fatal(err)
		}
		st := &fffSettle{stats: func() sdk.SDKStats { return r.Stats().SDK }, inZoneNode: inZoneNode, partitions: len(ends)}
		rd, err := fffConsume(ctx, r, ends, st.onMessage)
		sdkStats := r.Stats().SDK
		final := fffFetchOf(sdkStats)
		_ = r.Close()
		judgeRead(name, rd, err, want)
		t.Logf("%s: read all %d messages, %d duplicates, in %v; FetchFromFollower %v; fetch bytes by Stats().SDK: %v",
			name, rd.distinct, rd.dups, time.Since(t0).Round(time.Millisecond), sdkStats.FetchFromFollower, final)
		_, wc, _, wt := crossZone(wire, zone)
		t.Logf("%s: bytes read per rack on its connections (Dialer.DialFunc) %v: from other zones %d of %d (%s)", name, wire.Read(), wc, wt, share(wc, wt))
		if final.total < int64(want*size) {
			t.Errorf("%s: Stats().SDK.FetchBytes %d for %d messages of %d B: the fetch stats miss bytes", name, final.total, want, size)
		}
		if final.bytes[inZoneNode]*100 < final.total*95 || final.total == 0 {
			t.Errorf("%s: node %d (%s) served %d of %d fetch bytes (%s), want at least 95%%", name, inZoneNode, zone, final.bytes[inZoneNode], final.total, share(final.bytes[inZoneNode], final.total))
		}
		if final.inZone != final.bytes[inZoneNode] {
			t.Errorf("%s: FetchBytesInZone %d, node %d's bytes %d: want the same", name, final.inZone, inZoneNode, final.bytes[inZoneNode])
		}
		if st.settled == nil {
			t.Errorf("%s: never settled: node %d served no fetch bytes", name, inZoneNode)
			return
		}
		after := final.minus(*st.settled)
		t.Logf("%s: settled after %d messages (fetch bytes then: %v); since then: %v", name, st.settledAt, *st.settled, after)
		if after.cross() != 0 {
			t.Errorf("%s: %d fetch bytes from other zones after it settled (%v)", name, after.cross(), after)
		}
		// The wire counter holds the fetch traffic only if the engine dials
		// through the ReaderConfig's Dialer.DialFunc.
		if wt >= int64(want*size) && wc*10 > wt {
			t.Errorf("%s: %d of %d bytes read on its connections came from other zones (%s)", name, wc, wt, share(wc, wt))
		}
	}
	sdkReader("sdk.Reader in az-b, group", kafka.ReaderConfig{GroupID: "fff-sdk", StartOffset: kafka.FirstOffset}, ends)
	sdkReader("sdk.Reader in az-b, partition 1", kafka.ReaderConfig{Partition: 1}, map[int]int64{1: ends[1]})

	// Dead follower: pause after a third, kill node 2, resume.
	group := c.groupNotOn(ctx, "fff-kill", inZoneNode)
	t0 = time.Now()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond},
		append(sdkcOptions(), sdk.WithAZ(zone), sdk.WithFetchFromFollower(true))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	paused, resume := make(chan struct{}), make(chan struct{})
	var resumeOnce sync.Once
	defer resumeOnce.Do(func() { close(resume) })
	done := make(chan struct{})
	var killRd *fffRead
	var killErr error
	killCtx, killCancel := context.WithTimeout(ctx, 3*time.Minute)
	defer killCancel()
	// The pause waits for the event the kill needs, not for a count of
	// messages: the Reader settled on the in-zone follower (every
	// partition's last records came from it, by Assignment), from a third
	// of the messages on. A Reader that has not settled by five sixths is
	// paused anyway, and the test fails below.
	var pausedAt int
	settledOn := func() bool {
		parts := r.Assignment()
		for _, p := range parts {
			if p.FetchedFrom != inZoneNode {
				return false
			}
		}
		return len(parts) == partitions
	}
	go func() {
		defer close(done)
		killRd, killErr = fffConsume(killCtx, r, ends, func(read, _ int) {
			if pausedAt != 0 || read < n/3 || read%100 != 0 {
				return
			}
			if read < n*5/6 && !settledOn() {
				return
			}
			pausedAt = read
			close(paused)
			<-resume
		})
	}()
	select {
	case <-paused:
	case <-done:
		t.Fatalf("dead follower: the reader ended before a third of the messages: %v", killErr)
	}
	before := fffFetchOf(r.Stats().SDK)
	t.Logf("dead follower: paused after %d messages in %v, settled on node %d: %v; fetch bytes so far: %v",
		pausedAt, time.Since(t0).Round(time.Millisecond), inZoneNode, settledOn(), before)
	if !settledOn() {
		t.Errorf("dead follower: after %d messages the partitions were read from %v, not all from node %d: the kill proves nothing about a dead in-zone follower",
			pausedAt, r.Assignment(), inZoneNode)
	}
	c.Node(inZoneNode).Kill9()
	killedAt := time.Now()
	var outOfISR atomic.Int64 // nanoseconds after the kill; 0 while in some ISR
	isrDone := make(chan struct{})
	go func() {
		defer close(isrDone)
		for killCtx.Err() == nil && outOfISR.Load() == 0 {
			if md, err := c.metadata(killCtx, topic); err == nil {
				if parts, err := partitionsOf(md, topic); err == nil && len(parts) == partitions {
					in := false
					for _, p := range parts {
						for _, b := range p.Isr {
							in = in || b.ID == inZoneNode
						}
					}
					if !in {
						outOfISR.Store(int64(time.Since(killedAt)))
					}
				}
			}
			select {
			case <-killCtx.Done():
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	resumeOnce.Do(func() { close(resume) })
	<-done
	killCancel()
	<-isrDone
	final := fffFetchOf(r.Stats().SDK)
	after := final.minus(before)
	gap, gapEnd := killRd.maxGap(killedAt)
	isr := "not seen before the read ended"
	if d := outOfISR.Load(); d != 0 {
		isr = time.Duration(d).Round(time.Millisecond).String() + " after the kill"
	}
	var last time.Time
	if len(killRd.at) > 0 {
		last = killRd.at[len(killRd.at)-1]
	}
	t.Logf("dead follower: node %d (%s) killed with SIGKILL after %d of %d messages; it left every ISR %s; read %d of %d (%d duplicates, %d in another partition); longest pause between messages after the kill %v (ended %v after the kill); last message %v after the kill; whole read %v",
		inZoneNode, zone, pausedAt, n, isr, killRd.distinct, n, killRd.dups, killRd.misplaced, gap.Round(time.Millisecond), gapEnd.Sub(killedAt).Round(time.Millisecond),
		last.Sub(killedAt).Round(time.Millisecond), last.Sub(killRd.start).Round(time.Millisecond))
	t.Logf("dead follower: fetch bytes after the kill: %v", after)
	if killErr != nil {
		t.Fatalf("dead follower: the sdk.Reader did not read everything after its in-zone follower was killed: %v (missing per partition: %v; longest pause %v)",
			killErr, killRd.missingPerPartition(), gap.Round(time.Millisecond))
	}
	judgeRead("dead follower", killRd, nil, n)
}

// groupNotOn returns the first of prefix-0, prefix-1, … whose group
// coordinator is not node id, so that killing node id tests the fetch
// path alone, not a coordinator move.
func (c *kafkaCluster) groupNotOn(ctx context.Context, prefix string, id int) string {
	c.t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(c.LiveAddrs()...), Timeout: 5 * time.Second, Transport: tr}
	var last error
	for i := 0; ; {
		group := prefix + "-" + strconv.Itoa(i)
		fc, err := cl.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
		if err == nil && fc.Error != nil {
			err = fc.Error
		}
		if err == nil {
			if int(fc.Coordinator.NodeID) != id {
				return group
			}
			i++
			continue
		}
		last = err
		select {
		case <-ctx.Done():
			c.t.Fatalf("cluster: FindCoordinator %s: %v (last: %v)", group, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
