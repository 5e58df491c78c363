package sdk_test

// Fetch from follower (KIP-392) on the embedded cluster: kfake gives every
// broker the rack "krack" and serves fetches from the followers set with
// SetFollowers, but selects no preferred replica itself. A control
// function plays the leader's RackAwareReplicaSelector: node 0 leads every
// partition and, to a fetch that carries a rack, names node 1.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// followerZone is kfake's rack for every broker: the Reader's AZ here.
const followerZone = "krack"

// followerCluster is two embedded brokers, node 0 leading every partition
// of topic and node 1 allowed to serve them.
type followerCluster struct {
	c     *embedded.Cluster
	topic string
	parts int
	addr  map[int32]string // node ID -> address
	// redirects counts the fetches node 0 answered with preferred
	// replica 1; rackFetches every fetch that carried a rack.
	redirects, rackFetches atomic.Int64
}

func newFollowerCluster(t *testing.T, topic string, parts int) *followerCluster {
	t.Helper()
	fc := &followerCluster{
		c:     embedded.StartT(t, embedded.Brokers(2), embedded.Topic(topic, parts)),
		topic: topic,
		parts: parts,
		addr:  map[int32]string{},
	}
	k := fc.c.Kfake()
	for p := range int32(parts) {
		if err := k.MoveTopicPartition(topic, p, 0); err != nil {
			t.Fatal(err)
		}
		k.SetFollowers(topic, p, []int32{1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := (&kafka.Client{Addr: kafka.TCP(fc.c.Addrs()[0])}).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		fc.addr[int32(b.ID)] = net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
	}
	for _, tp := range md.Topics {
		for _, p := range tp.Partitions {
			if p.Leader.ID != 0 {
				t.Fatalf("partition %d led by node %d, want 0", p.ID, p.Leader.ID)
			}
		}
	}
	k.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fr := req.(*kmsg.FetchRequest)
		if fr.Rack == "" {
			return nil, nil, false
		}
		fc.rackFetches.Add(1)
		if k.CurrentNode() != 0 {
			return nil, nil, false
		}
		k.KeepControl()
		fc.redirects.Add(1)
		return preferReplica(fr, 1), nil, true
	})
	return fc
}

// preferReplica answers req as a leader whose replica selector picked
// node: no records, node as the preferred read replica of every
// partition, no fetch session.
func preferReplica(req *kmsg.FetchRequest, node int32) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = node
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// produce writes msgs to the topic straight to the brokers.
func (fc *followerCluster) produce(t *testing.T, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(fc.c.Addrs()...),
		Topic:        fc.topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    20, // many batches, so that reads take many fetches
		BatchTimeout: time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// group returns a group ID that node 0 coordinates, so that refusing
// node 1 leaves the group alone.
func (fc *followerCluster) group(prefix string) string {
	for i := 0; ; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		if fc.c.Kfake().CoordinatorFor(g) == 0 {
			return g
		}
	}
}

func (fc *followerCluster) reader(t *testing.T, group string, dialer *kafka.Dialer, opts ...sdk.Option) *sdk.Reader {
	t.Helper()
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers:           fc.c.Addrs(),
		GroupID:           group,
		Topic:             fc.topic,
		MaxWait:           100 * time.Millisecond,
		MaxBytes:          4 << 10,
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		Dialer:            dialer,
	}, testOptions(t, append([]sdk.Option{sdk.WithAZ(followerZone)}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// partitionOffset names one record.
type partitionOffset struct {
	partition int
	offset    int64
}

// readAll fetches until every offset below ends (partition -> end
// offset) was seen, and returns when the first message at or after from
// (partition -> offset) came.
func readAll(ctx context.Context, t *testing.T, r *sdk.Reader, seen map[partitionOffset]bool, values map[string]int, ends map[int]int64, from map[int]int64) time.Time {
	t.Helper()
	want := 0
	for _, e := range ends {
		want += int(e)
	}
	var first time.Time
	for len(seen) < want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("FetchMessage after %d of %d records: %v", len(seen), want, err)
		}
		if first.IsZero() && m.Offset >= from[m.Partition] {
			first = time.Now()
		}
		if m.Offset >= ends[m.Partition] {
			t.Fatalf("read %d/%d, past the end offset %d", m.Partition, m.Offset, ends[m.Partition])
		}
		seen[partitionOffset{m.Partition, m.Offset}] = true
		values[string(m.Value)]++
	}
	return first
}

// fetchedFrom returns the record bytes the Reader fetched from each node.
func fetchedFrom(st sdk.ReaderStats) map[int32]int64 {
	by := map[int32]int64{}
	for _, b := range st.SDK.FetchBrokers {
		by[b.NodeID] = b.Bytes
	}
	return by
}

// endsOf lists the end offset of every partition.
func (fc *followerCluster) ends(t *testing.T) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return deliverytest.EndOffsets(ctx, t, deliverytest.Topic{Addrs: fc.c.Addrs(), Name: fc.topic, Partitions: fc.parts})
}

// TestReaderFetchFromFollower: a group Reader in zone krack reads every
// record of a topic whose leader (node 0) names node 1 as the preferred
// replica, all of it from node 1; with fetch from follower off it sends
// no rack and reads all from the leader.
func TestReaderFetchFromFollower(t *testing.T) {
	const n = 900
	for _, follow := range []bool{true, false} {
		t.Run(fmt.Sprintf("follow=%v", follow), func(t *testing.T) {
			t.Parallel()
			fc := newFollowerCluster(t, "fff", 3)
			sent := deliverytest.Messages("fff", n)
			fc.produce(t, sent)
			r := fc.reader(t, fc.group("fff"), nil, sdk.WithFetchFromFollower(follow))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			seen, values := map[partitionOffset]bool{}, map[string]int{}
			readAll(ctx, t, r, seen, values, fc.ends(t), nil)
			if lost, _ := deliverytest.LostAndDuplicated(sent, values); lost != 0 {
				t.Fatalf("%d of %d messages never read", lost, n)
			}
			st := r.Stats()
			by := fetchedFrom(st)
			t.Logf("bytes fetched by node %v; in zone %d of %d; redirects %d, fetches with a rack %d",
				by, st.SDK.FetchBytesInZone, st.SDK.FetchBytes, fc.redirects.Load(), fc.rackFetches.Load())
			if st.SDK.FetchFromFollower != follow {
				t.Errorf("Stats().SDK.FetchFromFollower = %v, want %v", st.SDK.FetchFromFollower, follow)
			}
			if st.SDK.FetchBytes == 0 || st.SDK.FetchBytes != by[0]+by[1] {
				t.Fatalf("FetchBytes %d, by broker %v", st.SDK.FetchBytes, by)
			}
			if st.SDK.FetchBytesInZone != st.SDK.FetchBytes {
				t.Errorf("FetchBytesInZone %d, FetchBytes %d: every broker is in zone %s", st.SDK.FetchBytesInZone, st.SDK.FetchBytes, followerZone)
			}
			// Assignment names the broker each partition was last read
			// from: the preferred replica (node 1) or the leader (0).
			wantNode := int32(0)
			if follow {
				wantNode = 1
			}
			for _, p := range r.Assignment() {
				if p.FetchedFrom != wantNode || p.FetchedFromAddr == "" {
					t.Errorf("%s[%d] fetched from node %d (%q), want %d", p.Topic, p.Partition, p.FetchedFrom, p.FetchedFromAddr, wantNode)
				}
			}
			if follow {
				if fc.redirects.Load() == 0 {
					t.Fatal("the leader was never asked with a rack")
				}
				if by[0] != 0 {
					t.Errorf("%d of %d bytes fetched from the leader, want all from the preferred replica", by[0], st.SDK.FetchBytes)
				}
				return
			}
			if n := fc.rackFetches.Load(); n != 0 {
				t.Errorf("%d fetches carried a rack with fetch from follower off", n)
			}
			if by[1] != 0 {
				t.Errorf("%d bytes fetched from node 1 with fetch from follower off", by[1])
			}
		})
	}
}

// nodeDialer dials like net.Dialer and can play a broker dead: refuse
// its dials and close every connection made to it.
type nodeDialer struct {
	mu      sync.Mutex
	dead    map[string]bool
	conns   map[string][]net.Conn
	refused atomic.Int64
}

func (d *nodeDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	dead := d.dead[addr]
	d.mu.Unlock()
	if dead {
		d.refused.Add(1)
		a, _ := net.ResolveTCPAddr("tcp", addr)
		return nil, &net.OpError{Op: "dial", Net: network, Addr: a, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead[addr] { // killed while dialing
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	d.conns[addr] = append(d.conns[addr], c)
	return c, nil
}

// kill makes addr refuse dials and closes the connections to it.
func (d *nodeDialer) kill(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead[addr] = true
	for _, c := range d.conns[addr] {
		c.Close()
	}
	d.conns[addr] = nil
}

// TestReaderSurvivesDeadFollower: the Reader reads from node 1, the
// preferred replica of its zone; then node 1 dies for the Reader (dials
// refused, connections closed) while the leader keeps naming it to
// fetches with a rack, as a leader does until the cluster fences a dead
// broker. Every record written after the death must still be read, from
// the leader.
func TestReaderSurvivesDeadFollower(t *testing.T) {
	t.Parallel()
	const half = 600
	fc := newFollowerCluster(t, "fffdead", 3)
	sent := deliverytest.Messages("dead", 2*half)
	fc.produce(t, sent[:half])
	d := &nodeDialer{dead: map[string]bool{}, conns: map[string][]net.Conn{}}
	r := fc.reader(t, fc.group("fffdead"), &kafka.Dialer{Timeout: 5 * time.Second, DialFunc: d.dial})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen, values := map[partitionOffset]bool{}, map[string]int{}
	before := fc.ends(t)
	readAll(ctx, t, r, seen, values, before, nil)
	byBefore := fetchedFrom(r.Stats())
	if byBefore[1] == 0 || byBefore[0] != 0 {
		t.Fatalf("before the death: bytes by node %v, want all from node 1", byBefore)
	}
	redirectsBefore := fc.redirects.Load()

	d.kill(fc.addr[1])
	died := time.Now()
	fc.produce(t, sent[half:])
	first := readAll(ctx, t, r, seen, values, fc.ends(t), before)
	pause := first.Sub(died)
	byAfter := fetchedFrom(r.Stats())
	t.Logf("node 1 dead: first new record after %v, all read after %v; dials refused %d; the leader named node 1 %d more times; bytes by node %v (before %v)",
		pause.Round(time.Millisecond), time.Since(died).Round(time.Millisecond), d.refused.Load(),
		fc.redirects.Load()-redirectsBefore, byAfter, byBefore)
	if lost, _ := deliverytest.LostAndDuplicated(sent, values); lost != 0 {
		t.Fatalf("%d of %d messages never read", lost, len(sent))
	}
	if d.refused.Load() == 0 {
		t.Fatal("no dial to node 1 was refused: the test proves nothing")
	}
	if byAfter[0] <= byBefore[0] {
		t.Errorf("bytes from the leader did not grow: %d, before %d", byAfter[0], byBefore[0])
	}
}
