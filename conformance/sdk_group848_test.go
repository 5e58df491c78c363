//go:build conformance

package conformance

// A consumer group of sdk.Readers on KIP-848's consumer protocol on the
// real broker, side by side with the classic protocol: members join one by
// one while reading, one leaves with Close, one is cut off without Close
// (its connections reset and refused, as when its host dies), the rest go
// on. Nothing is lost, the group commits to the end of every partition,
// and the pauses around each membership change are logged for both
// protocols.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

const (
	g848Partitions = 8
	// g848Messages is the least the producer writes; it goes on until
	// every membership change has settled, so that each change happens
	// under load.
	g848Messages = 30000
	// The producer writes g848Batch messages every g848Tick: 1,200 msgs/s,
	// a new record about every 50 ms on each partition, the resolution of
	// the pauses measured.
	g848Batch = 60
	g848Tick  = 50 * time.Millisecond
	// g848Settle bounds each wait on the group; the broker's own timeouts
	// (6 s sessions) are well inside it.
	g848Settle = 90 * time.Second
)

// g848Reads records when each (partition, offset) was first read, by any
// member.
type g848Reads struct {
	mu    sync.Mutex
	first [][]time.Time // [partition][offset]; zero: not read yet
	by    [][]string    // [partition][offset]: the member that read it first
	last  []time.Time   // [partition]: the latest first read
	total int           // every read, re-deliveries included
}

func newG848Reads(parts int) *g848Reads {
	return &g848Reads{first: make([][]time.Time, parts), by: make([][]string, parts), last: make([]time.Time, parts)}
}

func (r *g848Reads) record(member string, p int, off int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	for int64(len(r.first[p])) <= off {
		r.first[p] = append(r.first[p], time.Time{})
		r.by[p] = append(r.by[p], "")
	}
	if r.first[p][off].IsZero() {
		r.first[p][off] = at
		r.by[p][off] = member
		r.last[p] = at
	}
}

// gaps describes the runs of unread offsets below ends: each run, and who
// read the offsets around it and when (since start).
func (r *g848Reads) gaps(ends map[int]int64, start time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	around := func(p int, off int64) string {
		if off < 0 || off >= int64(len(r.first[p])) || r.first[p][off].IsZero() {
			return "-"
		}
		return fmt.Sprintf("%s at %v", r.by[p][off], r.first[p][off].Sub(start).Round(time.Millisecond))
	}
	var b strings.Builder
	for p := 0; p < len(r.first); p++ {
		runs := 0
		for off := int64(0); off < ends[p]; off++ {
			if off < int64(len(r.first[p])) && !r.first[p][off].IsZero() {
				continue
			}
			from := off
			for off < ends[p] && (off >= int64(len(r.first[p])) || r.first[p][off].IsZero()) {
				off++
			}
			if runs++; runs <= 5 {
				fmt.Fprintf(&b, "\n  partition %d offsets %d-%d unread; %d read by %s, %d by %s", p, from, off-1, from-1, around(p, from-1), off, around(p, off))
			}
		}
	}
	return b.String()
}

// progressedSince reports whether every partition delivered a record
// never read before after t.
func (r *g848Reads) progressedSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.last {
		if !l.After(t) {
			return false
		}
	}
	return true
}

// unread returns how many offsets below ends were never read, per
// partition (partitions with none left out).
func (r *g848Reads) unread(ends map[int]int64) map[int]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]int64{}
	for p, end := range ends {
		for off := int64(0); off < end; off++ {
			if off >= int64(len(r.first[p])) || r.first[p][off].IsZero() {
				out[p]++
			}
		}
	}
	return out
}

// pause returns the longest interval between two consecutive first reads
// that starts before to and ends after from, cut at to (a pause that the
// next change caused is that change's): over the whole group, and on the
// partition where it was longest. A window that starts before any read
// counts from its start.
func (r *g848Reads) pause(from, to time.Time) (group time.Duration, part time.Duration, worst int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []time.Time
	worst = -1
	for p, offs := range r.first {
		var ts []time.Time
		for _, at := range offs {
			if !at.IsZero() {
				ts = append(ts, at)
			}
		}
		all = append(all, ts...)
		if g := longestGap(ts, from, to); g > part {
			part, worst = g, p
		}
	}
	return longestGap(all, from, to), part, worst
}

func longestGap(ts []time.Time, from, to time.Time) time.Duration {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var longest time.Duration
	prev := from
	if i, _ := slices.BinarySearchFunc(ts, from, func(a, b time.Time) int { return a.Compare(b) }); i > 0 {
		prev = ts[i-1]
		ts = ts[i:]
	}
	for _, at := range ts {
		if !prev.Before(to) {
			break
		}
		if at.After(to) {
			at = to
		}
		longest = max(longest, at.Sub(prev))
		prev = at
	}
	return longest
}

// g848Member is one sdk.Reader of the group, reading with FetchMessage and
// committing with CommitMessages every 50 messages and whenever it is idle
// for 200 ms.
type g848Member struct {
	name   string
	r      *sdk.Reader
	proxy  *kproxy.Proxy // the member's only way to the broker, when it can be cut off
	dead   atomic.Bool   // cut off: what it reads after that is not processed
	cancel context.CancelFunc
	done   chan struct{}
	err    error // the first error of FetchMessage or CommitMessages; read after done
	read   atomic.Int64
	// refused counts the commits the group refused for a generation that
	// ended (a rebalance while the commit was on its way, its partitions
	// given to another member): kafka-go's CommitMessages returns the
	// same refusal, and the new owner reads them again from the group's
	// offset.
	refused atomic.Int64
	closed  bool
}

func startG848Member(t *testing.T, name string, cfg kafka.ReaderConfig, opts []sdk.Option, reads *g848Reads, proxy *kproxy.Proxy) *g848Member {
	t.Helper()
	r, err := sdk.NewReader(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &g848Member{name: name, r: r, proxy: proxy, cancel: cancel, done: make(chan struct{})}
	go m.loop(ctx, reads)
	return m
}

func (m *g848Member) loop(ctx context.Context, reads *g848Reads) {
	defer close(m.done)
	pending := make([]kafka.Message, 0, 50)
	commit := func(ctx context.Context) error {
		if len(pending) == 0 {
			return nil
		}
		err := m.r.CommitMessages(ctx, pending...)
		pending = pending[:0]
		return err
	}
	fail := func(op string, err error) {
		if op == "CommitMessages" && groupRefused(err) {
			m.refused.Add(1)
			return
		}
		if m.err == nil && !m.dead.Load() && ctx.Err() == nil {
			m.err = fmt.Errorf("%s: %s after %d messages: %w", m.name, op, m.read.Load(), err)
		}
	}
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msg, err := m.r.FetchMessage(fctx)
		cancel()
		if m.dead.Load() {
			return // the process is gone: nothing it reads now is processed
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) { // idle
				if err := commit(ctx); err != nil {
					fail("CommitMessages", err)
				}
				continue
			}
			fail("FetchMessage", err)
			return
		}
		reads.record(m.name, msg.Partition, msg.Offset, time.Now())
		m.read.Add(1)
		pending = append(pending, msg)
		if len(pending) == cap(pending) {
			if err := commit(ctx); err != nil {
				fail("CommitMessages", err)
			}
		}
	}
	if m.dead.Load() {
		return
	}
	// A graceful stop commits what was read before leaving.
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := commit(cctx); groupRefused(err) {
		m.refused.Add(1)
	} else if err != nil && m.err == nil {
		m.err = fmt.Errorf("%s: final CommitMessages: %w", m.name, err)
	}
}

// groupRefused reports whether err is a group's refusal of a commit for
// a generation that ended.
func groupRefused(err error) bool {
	return errors.Is(err, kafka.IllegalGeneration) || errors.Is(err, kafka.RebalanceInProgress) || errors.Is(err, kafka.UnknownMemberId) ||
		errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, kerr.FencedMemberEpoch)
}

// leave stops reading, commits what was read and closes the Reader; it
// returns how long Close took.
func (m *g848Member) leave(t *testing.T) time.Duration {
	t.Helper()
	m.cancel()
	<-m.done
	m.closed = true
	start := time.Now()
	if err := m.r.Close(); err != nil {
		t.Errorf("%s: Close: %v", m.name, err)
	}
	return time.Since(start)
}

// kill cuts the member off without Close: its connections are reset and
// new ones refused, and it processes nothing more.
func (m *g848Member) kill(t *testing.T) {
	t.Helper()
	m.dead.Store(true)
	if err := m.proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	m.proxy.ResetAll()
	m.cancel()
	<-m.done
}

// g848Change is one membership change and when it was made.
type g848Change struct {
	what string
	at   time.Time
}

// g848Result is what one protocol's run measured around each change.
type g848Result struct {
	changes   []g848Change
	groupWide []time.Duration
	partition []time.Duration
	worst     []int
	leaveTook time.Duration
}

// TestSDKConsumerProtocolGroup: a group of sdk.Readers on a topic of 8
// partitions under steady production (at least 30,000 messages): four
// members join one by one, one leaves with Close, one is cut off without
// Close and evicted by the broker's session timeout (6 s), two read to the
// end. With sdk.GroupProtocolConsumer (KIP-848) and, side by side,
// sdk.GroupProtocolClassic: every (partition, offset) is read at least
// once, the group's committed offsets are the end offsets, and the broker
// lists the group as a group of that protocol. The longest pause in
// consumption around each change is logged, over the whole group and on
// the worst partition; it is not judged.
func TestSDKConsumerProtocolGroup(t *testing.T) {
	inLane(t, &brokerLane)
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := waitGroupCoordinator(ctx, addrs[0]); err != nil {
		t.Fatal(err)
	}
	results := map[sdk.GroupProtocol]g848Result{}
	for _, proto := range []sdk.GroupProtocol{sdk.GroupProtocolConsumer, sdk.GroupProtocolClassic} {
		t.Run("protocol="+string(proto), func(t *testing.T) {
			results[proto] = runG848Group(t, proto)
		})
	}
	c, k := results[sdk.GroupProtocolConsumer], results[sdk.GroupProtocolClassic]
	if len(c.changes) == 0 || len(c.changes) != len(k.changes) {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "longest pause in consumption after each membership change (group-wide / worst partition):\n")
	fmt.Fprintf(&b, "%-34s %-26s %s\n", "change", "consumer (KIP-848)", "classic")
	for i, ch := range c.changes {
		fmt.Fprintf(&b, "%-34s %-26s %s\n", ch.what,
			fmt.Sprintf("%v / %v", c.groupWide[i].Round(time.Millisecond), c.partition[i].Round(time.Millisecond)),
			fmt.Sprintf("%v / %v", k.groupWide[i].Round(time.Millisecond), k.partition[i].Round(time.Millisecond)))
	}
	fmt.Fprintf(&b, "Close of the leaving member: consumer %v, classic %v", c.leaveTook.Round(time.Millisecond), k.leaveTook.Round(time.Millisecond))
	t.Log(b.String())
}

func runG848Group(t *testing.T, proto sdk.GroupProtocol) g848Result {
	rig := newSDKCRig(t, "g848-"+string(proto), g848Partitions)
	group := "g-" + rig.topic
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if proto == sdk.GroupProtocolConsumer {
		setG848GroupTimeouts(t, ctx, rig.addrs[0], group)
	}

	// The producer writes straight to the broker until it wrote
	// g848Messages and every change settled.
	w := &kafka.Writer{Addr: kafka.TCP(rig.addrs...), Topic: rig.topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: g848Batch, BatchTimeout: time.Millisecond}
	defer w.Close()
	var changesDone atomic.Bool
	produced := make(chan int, 1)
	var prodErr error
	go func() {
		tick := time.NewTicker(g848Tick)
		defer tick.Stop()
		n := 0
		for n < g848Messages || !changesDone.Load() {
			batch := make([]kafka.Message, g848Batch)
			for i := range batch {
				v := fmt.Sprintf("g848-%07d", n+i)
				batch[i] = kafka.Message{Key: []byte(v), Value: []byte(v)}
			}
			if err := w.WriteMessages(ctx, batch...); err != nil {
				prodErr = err
				break
			}
			n += len(batch)
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		produced <- n
	}()

	reads := newG848Reads(g848Partitions)
	cfg := rig.groupConfig(group)
	cfg.Brokers = rig.addrs // members reach the broker directly; the one to be cut off goes through the proxy
	opts := append(sdkcOptions(), sdk.WithGroupProtocol(proto))
	var members []*g848Member
	t.Cleanup(func() {
		for _, m := range members {
			m.cancel()
			<-m.done
			switch {
			case m.dead.Load():
				// Still cut off: Close cannot leave the group.
				start := time.Now()
				closed := make(chan error, 1)
				go func() { closed <- m.r.Close() }()
				select {
				case err := <-closed:
					t.Logf("%s (cut off): Close returned %v after %v", m.name, err, time.Since(start).Round(time.Millisecond))
				case <-time.After(30 * time.Second):
					t.Logf("%s (cut off): Close still blocked after 30s", m.name)
				}
			case !m.closed:
				_ = m.r.Close()
			}
		}
	})
	join := func(name string, proxy *kproxy.Proxy) *g848Member {
		c := cfg
		if proxy != nil {
			c.Brokers = []string{proxy.Addr()}
		}
		m := startG848Member(t, name, c, opts, reads, proxy)
		members = append(members, m)
		return m
	}
	live := func() int {
		n := 0
		for _, m := range members {
			if !m.dead.Load() {
				select {
				case <-m.done:
				default:
					n++
				}
			}
		}
		return n
	}
	var res g848Result
	change := func(what string, do func()) {
		t.Helper()
		at := time.Now()
		do()
		res.changes = append(res.changes, g848Change{what: what, at: at})
		waitG848Settled(t, ctx, rig, group, proto, live(), reads, members, what)
	}

	change("m1 joins (time to first message)", func() { join("m1", nil) })
	var m2, m3 *g848Member
	change("m2 joins", func() { m2 = join("m2", nil) })
	change("m3 joins", func() { m3 = join("m3", rig.proxy) })
	change("m4 joins", func() { join("m4", nil) })
	change("m2 leaves (Close)", func() { res.leaveTook = m2.leave(t) })
	change("m3 cut off (no Close)", func() { m3.kill(t) })
	changesDone.Store(true)

	var n int
	select {
	case n = <-produced:
	case <-ctx.Done():
		t.Fatalf("producer still writing: %v", ctx.Err())
	}
	prodEnd := time.Now()
	if prodErr != nil {
		t.Fatalf("WriteMessages after %d messages: %v", n, prodErr)
	}
	ends := rig.endOffsets(t)
	waitG848CommittedToEnd(t, ctx, rig, group, ends, reads, members)
	for _, m := range members {
		if !m.dead.Load() && !m.closed {
			m.leave(t)
		}
	}
	for _, m := range members {
		if m.err != nil {
			t.Error(m.err)
		}
	}

	unread := reads.unread(ends)
	var lost, total int64
	for _, e := range ends {
		total += e
	}
	for _, u := range unread {
		lost += u
	}
	reads.mu.Lock()
	dups := int64(reads.total) - (total - lost)
	reads.mu.Unlock()
	var refused int64
	for _, m := range members {
		refused += m.refused.Load()
	}
	t.Logf("%s: produced %d messages in %v; read %d offsets of %d (lost %d), %d re-deliveries; per member %s; %d commits refused for an ended generation",
		proto, n, prodEnd.Sub(res.changes[0].at).Round(time.Millisecond), total-lost, total, lost, dups, memberCounts(members), refused)
	if lost != 0 {
		var timeline strings.Builder
		for _, ch := range res.changes {
			fmt.Fprintf(&timeline, "\n  %v %s", ch.at.Sub(res.changes[0].at).Round(time.Millisecond), ch.what)
		}
		t.Errorf("%d offsets never read, by partition %v, though the group committed the end offsets:%s\nchanges:%s",
			lost, unread, reads.gaps(ends, res.changes[0].at), timeline.String())
	}
	if total < g848Messages {
		t.Errorf("the topic holds %d messages, want at least %d", total, g848Messages)
	}
	// Once more after every Close: no late commit moved an offset back.
	if committed, err := committedG848(ctx, rig.addrs[0], group, rig.topic, rig.parts); err != nil {
		t.Errorf("OffsetFetch: %v", err)
	} else {
		for p, end := range ends {
			if committed[p] != end {
				t.Errorf("partition %d: committed offset %d, end offset %d", p, committed[p], end)
			}
		}
	}
	requireG848GroupType(t, ctx, rig.addrs[0], group, proto)

	for i, ch := range res.changes {
		to := prodEnd
		if i+1 < len(res.changes) {
			to = res.changes[i+1].at
		}
		g, p, worst := reads.pause(ch.at, to)
		res.groupWide = append(res.groupWide, g)
		res.partition = append(res.partition, p)
		res.worst = append(res.worst, worst)
		t.Logf("%s: %-34s longest pause: group-wide %v, partition %d %v", proto, ch.what, g.Round(time.Millisecond), worst, p.Round(time.Millisecond))
	}
	return res
}

func memberCounts(ms []*g848Member) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s=%d", m.name, m.read.Load()))
	}
	return strings.Join(parts, " ")
}

// setG848GroupTimeouts gives the consumer-protocol group the classic
// members' timeouts (6 s session, 500 ms heartbeats) through the group's
// dynamic configs; run.sh's broker allows them
// (group.consumer.min.session.timeout.ms and
// group.consumer.min.heartbeat.interval.ms). Another broker may keep its
// defaults (45 s and 5 s): the test then only takes longer.
func setG848GroupTimeouts(t *testing.T, ctx context.Context, addr, group string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for k, v := range map[string]string{"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "500"} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	for _, r := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Logf("group %s keeps the broker's consumer-protocol timeouts: %v (%s)", group, err, deref(r.ErrorMessage))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// g848GroupType returns the group's type as ListGroups v5 lists it
// ("classic", "consumer", ...), "" when it is not listed.
func g848GroupType(ctx context.Context, addr, group string, types ...string) (string, error) {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	req.TypesFilter = types
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		return "", err
	}
	lr := resp.(*kmsg.ListGroupsResponse)
	if err := kerr.ErrorForCode(lr.ErrorCode); err != nil {
		return "", err
	}
	for _, g := range lr.Groups {
		if g.Group == group {
			return g.GroupType, nil
		}
	}
	return "", nil
}

// requireG848GroupType checks that ListGroups with a types filter of the
// protocol lists the group.
func requireG848GroupType(t *testing.T, ctx context.Context, addr, group string, proto sdk.GroupProtocol) {
	t.Helper()
	typ, err := g848GroupType(ctx, addr, group, string(proto))
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if typ != string(proto) {
		actual, _ := g848GroupType(ctx, addr, group)
		t.Errorf("ListGroups(types=[%s]) does not list group %s: the broker has it as a %q group", proto, group, actual)
	}
}

// g848State is the group as the coordinator describes it.
type g848State struct {
	state    string
	members  int
	assigned []int32 // every member's partitions, sorted
	// reconciling is set when a consumer-protocol member's assignment is
	// not its target assignment yet.
	reconciling bool
}

func (s g848State) String() string {
	return fmt.Sprintf("state %s, %d members, partitions %v, reconciling %v", s.state, s.members, s.assigned, s.reconciling)
}

func describeG848(ctx context.Context, addr, group, topic string, proto sdk.GroupProtocol) (g848State, error) {
	if proto == sdk.GroupProtocolClassic {
		g, err := describeUpgradeGroup(ctx, addr, group, topic)
		return g848State{state: g.state, members: g.members, assigned: g.assigned}, err
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = 0
	req.Groups = []string{group}
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		return g848State{}, err
	}
	groups := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups
	if len(groups) != 1 {
		return g848State{}, fmt.Errorf("ConsumerGroupDescribe answered %d groups", len(groups))
	}
	g := groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return g848State{}, fmt.Errorf("ConsumerGroupDescribe: %w (%s)", err, deref(g.ErrorMessage))
	}
	out := g848State{state: g.State, members: len(g.Members)}
	parts := func(a kmsg.Assignment) []int32 {
		var ps []int32
		for _, tp := range a.TopicPartitions {
			ps = append(ps, tp.Partitions...) // the group reads one topic
		}
		slices.Sort(ps)
		return ps
	}
	for _, m := range g.Members {
		have, want := parts(m.Assignment), parts(m.TargetAssignment)
		if !slices.Equal(have, want) {
			out.reconciling = true
		}
		out.assigned = append(out.assigned, have...)
	}
	slices.Sort(out.assigned)
	return out, nil
}

// waitG848Settled waits until the coordinator has the group stable with
// members members that own every partition once, and every partition then
// delivered a new record to one of them.
func waitG848Settled(t *testing.T, ctx context.Context, rig *sdkcRig, group string, proto sdk.GroupProtocol, members int, reads *g848Reads, ms []*g848Member, what string) {
	t.Helper()
	deadline := time.Now().Add(g848Settle)
	var stableAt time.Time
	var last g848State
	var err error
	for {
		for _, m := range ms {
			select {
			case <-m.done:
				if m.err != nil {
					t.Fatalf("%s: %v", what, m.err)
				}
			default:
			}
		}
		last, err = describeG848(ctx, rig.addrs[0], group, rig.topic, proto)
		if err != nil && errors.Is(err, kerr.GroupIDNotFound) {
			// Not a consumer-protocol group (yet): fail at once if the
			// broker has it as another type.
			if typ, lerr := g848GroupType(ctx, rig.addrs[0], group); lerr == nil && typ != "" && typ != string(proto) {
				t.Fatalf("%s: the broker has group %s as a %q group, want %q", what, group, typ, proto)
			}
		}
		ok := err == nil && strings.EqualFold(last.state, "stable") && last.members == members && !last.reconciling &&
			len(last.assigned) == rig.parts && len(slices.Compact(slices.Clone(last.assigned))) == rig.parts
		switch {
		case !ok:
			stableAt = time.Time{}
		case stableAt.IsZero():
			stableAt = time.Now()
		case reads.progressedSince(stableAt):
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: group not settled with %d members within %v: %v (error %v); every partition read since stable: %v",
				what, members, g848Settle, last, err, !stableAt.IsZero() && reads.progressedSince(stableAt))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitGroupCoordinator waits until the broker's group coordinator answers
// OffsetFetch: on a fresh broker, the first group of the run would
// otherwise wait for __consumer_offsets to be created and loaded, and the
// first measured join would include that.
func waitGroupCoordinator(ctx context.Context, addr string) error {
	const warmup = "azkafka-coordinator-warmup"
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 4
		req.CoordinatorKeys = []string{warmup}
		resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
		if err == nil {
			for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
				err = errors.Join(err, kerr.ErrorForCode(c.ErrorCode))
			}
		}
		if err == nil {
			_, err = committedG848(ctx, addr, warmup, warmup, 1)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group coordinator not ready: %w (%v)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// committedG848 fetches the group's committed offsets with OffsetFetch v8.
func committedG848(ctx context.Context, addr, group, topic string, parts int) (map[int]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = topic
	for p := 0; p < parts; p++ {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, g := range resp.(*kmsg.OffsetFetchResponse).Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
				}
				out[int(p.Partition)] = p.Offset
			}
		}
	}
	return out, nil
}

// waitG848CommittedToEnd waits until the group committed ends. A member
// records what it read before it commits it: offsets still unread then
// were passed over (the caller counts them).
func waitG848CommittedToEnd(t *testing.T, ctx context.Context, rig *sdkcRig, group string, ends map[int]int64, reads *g848Reads, ms []*g848Member) {
	t.Helper()
	deadline := time.Now().Add(g848Settle)
	for {
		committed, err := committedG848(ctx, rig.addrs[0], group, rig.topic, rig.parts)
		var behind []string
		if err == nil {
			ps := make([]int, 0, len(ends))
			for p := range ends {
				ps = append(ps, p)
			}
			sort.Ints(ps)
			for _, p := range ps {
				if committed[p] != ends[p] {
					behind = append(behind, fmt.Sprintf("%d: %d of %d", p, committed[p], ends[p]))
				}
			}
		}
		if err == nil && len(behind) == 0 {
			return
		}
		for _, m := range ms {
			select {
			case <-m.done:
				if m.err != nil {
					t.Fatalf("reading to the end: %v", m.err)
				}
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not committed to the end within %v: OffsetFetch error %v, committed behind %v, unread %v", g848Settle, err, behind, reads.unread(ends))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("reading to the end: %v", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
