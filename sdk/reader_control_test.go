package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// writeSpread writes n messages to each of rig's partitions ("p<partition>-<i>").
func writeSpread(t *testing.T, rig *faultRig, n int) {
	t.Helper()
	w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return int(m.Key[0]) })}
	defer w.Close()
	var msgs []kafka.Message
	for i := range n {
		for p := range rig.parts {
			msgs = append(msgs, kafka.Message{Key: []byte{byte(p)}, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
		t.Fatal(err)
	}
}

// offsetLog checks that each partition's messages are handed out in
// order, each once, from its first offset.
type offsetLog struct {
	t    *testing.T
	next map[int]int64
}

// take fetches the next message of r, adds it and commits it.
func (l *offsetLog) take(ctx context.Context, r *sdk.Reader) kafka.Message {
	l.t.Helper()
	m, err := r.FetchMessage(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	l.add(m)
	if err := r.CommitMessages(ctx, m); err != nil {
		l.t.Fatal(err)
	}
	return m
}

func (l *offsetLog) add(m kafka.Message) {
	l.t.Helper()
	if l.next == nil {
		l.next = map[int]int64{}
	}
	if want := l.next[m.Partition]; m.Offset != want {
		l.t.Fatalf("partition %d: offset %d handed out, want %d (skipped or repeated)", m.Partition, m.Offset, want)
	}
	l.next[m.Partition] = m.Offset + 1
}

// TestReaderPauseResume: a paused partition hands out nothing, fetched or
// not, while the others go on; after Resume its messages come in order,
// none skipped or repeated, also those fetched before Pause. The pause
// lasts across a rebalance that takes the partition away and gives it
// back (each message is committed, so the partitions restart where the
// Reader was).
func TestReaderPauseResume(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "pause", 2)
	const n = 20
	writeSpread(t, rig, n)
	cfg := groupTestConfig(rig, "pause")
	cfg.QueueCapacity = 7 // a poll buffers some of both partitions
	rebalanced := make(chan map[string][]int, 8)
	r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Assigned: func(_ context.Context, ps map[string][]int) { rebalanced <- ps },
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	log := &offsetLog{t: t}
	for range 3 {
		log.take(ctx, r)
	}
	r.Pause(rig.topic, 0)
	if topics, parts := r.Paused(); len(topics) != 0 || !slices.Equal(parts[rig.topic], []int{0}) {
		t.Errorf("Paused() = %v, %v; want partition 0 of %s", topics, parts, rig.topic)
	}
	// Partition 1 goes on to its end.
	for log.next[1] < n {
		if m := log.take(ctx, r); m.Partition == 0 {
			t.Fatalf("message %s of paused partition 0 handed out", m.Value)
		}
	}

	// A rebalance: a second member joins and leaves; partition 0 comes
	// back to this Reader still paused.
	<-rebalanced
	otherAssigned := make(chan struct{}, 1)
	other, err := sdk.NewReader(cfg, testOptions(t, sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Assigned: func(context.Context, map[string][]int) {
			select {
			case otherAssigned <- struct{}{}:
			default:
			}
		},
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// The other member reads nothing: it only joins, until the
		// group has given it a partition, then leaves.
		<-otherAssigned
		other.Close()
	}()
	// other's engine joins the group once it reads.
	go func() { _, _ = other.FetchMessage(ctx) }()
	for owned := false; !owned; {
		select {
		case ps := <-rebalanced:
			owned = len(ps[rig.topic]) == 2
		case <-ctx.Done():
			t.Fatal("the partitions did not come back to the Reader")
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	m, err := r.FetchMessage(short)
	cancel()
	if err == nil {
		t.Fatalf("message %s (partition %d) handed out while partition 0 is paused and 1 is read to its end", m.Value, m.Partition)
	}
	if _, parts := r.Paused(); !slices.Equal(parts[rig.topic], []int{0}) {
		t.Errorf("after the rebalance, Paused() = %v; want partition 0 still paused", parts)
	}

	r.Resume(rig.topic, 0)
	for log.next[0] < n {
		log.take(ctx, r)
	}
	if _, parts := r.Paused(); len(parts) != 0 {
		t.Errorf("after Resume, Paused() = %v", parts)
	}
}

// TestReaderPauseKeepsFetchedMessages: messages fetched and buffered
// before Pause are handed out after Resume, in order, none lost or
// repeated (a partition Reader, no rebalance involved).
func TestReaderPauseKeepsFetchedMessages(t *testing.T) {
	t.Parallel()
	const n = 30
	ctx := testCtx(t)
	r, m := bufferingReader(ctx, t, "pause-buffer", n)
	log := &offsetLog{t: t}
	log.add(m)
	r.Pause(m.Topic)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if m, err := r.FetchMessage(short); err == nil {
		t.Fatalf("offset %d handed out while the topic is paused", m.Offset)
	}
	cancel()
	r.Resume(m.Topic)
	for log.next[0] < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.add(m)
	}
}

// bufferingReader returns a partition Reader of a topic of n messages
// and the first message it handed out, with more of the topic buffered
// (the tests of what Pause drops need them).
func bufferingReader(ctx context.Context, t *testing.T, name string, n int) (*sdk.Reader, kafka.Message) {
	t.Helper()
	rig := newFaultRig(t, name, 1)
	writeSpread(t, rig, n)
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: rig.topic, MaxWait: 50 * time.Millisecond,
		QueueCapacity: 100}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q := r.Stats().QueueLength; q == 0 {
		t.Fatalf("nothing buffered after the first message; the test needs buffered messages")
	}
	return r, m
}

// TestReaderSetOffsetWhilePaused: SetOffset on a paused partition Reader
// wins over the messages the Pause dropped unread: after another Pause and
// Resume, the next message is the one at the new offset, not the first
// one dropped.
func TestReaderSetOffsetWhilePaused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r, m := bufferingReader(ctx, t, "pause-setoffset", 30)
	r.Pause(m.Topic) // drops offsets 1.. unread
	if err := r.SetOffset(20); err != nil {
		t.Fatal(err)
	}
	// A read while paused starts the partition at 20 and hands out nothing.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if m, err := r.FetchMessage(short); err == nil {
		t.Fatalf("offset %d handed out while the topic is paused", m.Offset)
	}
	cancel()
	r.Pause(m.Topic)
	r.Resume(m.Topic)
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Offset != 20 {
		t.Fatalf("after SetOffset(20), Pause and Resume the next message is offset %d, want 20", m.Offset)
	}
}

// TestReaderSeekInGroup: a group member moves within a partition it owns
// (kafka-go refuses SetOffset with a GroupID): the next messages are
// exactly those from the new offset; a partition it does not own is
// refused with ErrNotOwned; with CommitInterval > 0, what is committed
// after a seek back is what was given to CommitMessages after it.
func TestReaderSeekInGroup(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "seek", 1)
	const n = 10
	writeSpread(t, rig, n)
	cfg := groupTestConfig(rig, "seek")
	cfg.CommitInterval = time.Hour // marks; committed by Close
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	read := func(k int) []int64 {
		var got []int64
		for range k {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Offset)
		}
		return got
	}
	if got := read(6); !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("first reads: %v", got)
	}
	if err := r.Seek(ctx, rig.topic, 0, 2); err != nil {
		t.Fatal(err)
	}
	if got, pos := read(2), r.Assignment()[0].Position; !slices.Equal(got, []int64{2, 3}) || pos != 4 {
		t.Fatalf("after Seek to 2: %v, position %d; want [2 3], 4", got, pos)
	}
	if err := r.Seek(ctx, rig.topic, 7, 0); !errors.Is(err, sdk.ErrNotOwned) {
		t.Errorf("Seek to a partition the Reader does not own: %v, want ErrNotOwned", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Close committed the marks: offset 4, not the 6 marked before the
	// seek back.
	resp, err := (&kafka.Client{Addr: kafka.TCP(rig.broker.Addrs()...)}).OffsetFetch(testCtx(t),
		&kafka.OffsetFetchRequest{GroupID: "seek", Topics: map[string][]int{rig.topic: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[rig.topic][0].CommittedOffset; got != 4 {
		t.Errorf("committed offset %d after the seek back, want 4", got)
	}

	// A new member starts at the commit; Seek to kafka.FirstOffset and
	// kafka.LastOffset ask the leader.
	r2, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	m, err := r2.FetchMessage(ctx)
	if err != nil || m.Offset != 4 {
		t.Fatalf("a new member starts at offset %d (%v), want the commit, 4", m.Offset, err)
	}
	if err := r2.Seek(ctx, rig.topic, 0, kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	if m, err := r2.FetchMessage(ctx); err != nil || m.Offset != 0 {
		t.Fatalf("after Seek to FirstOffset: offset %d (%v), want 0", m.Offset, err)
	}
	if err := r2.Seek(ctx, rig.topic, 0, kafka.LastOffset); err != nil {
		t.Fatal(err)
	}
	if p := r2.Assignment()[0]; p.Position != n || p.Lag != 0 {
		t.Errorf("after Seek to LastOffset: %+v, want position %d, lag 0", p, n)
	}
}

// TestReaderRebalanceCallbacks: Assigned gets the partitions before any of
// their messages; Revoked runs when a second member joins, before the
// Reader commits the revoked partitions' marks, so a CommitMessages in it
// is in that commit.
func TestReaderRebalanceCallbacks(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "callbacks", 2)
	writeSpread(t, rig, 5)
	cfg := groupTestConfig(rig, "callbacks")
	cfg.CommitInterval = time.Hour // marks, committed at a revocation
	var (
		mu       sync.Mutex
		events   []string
		pending  []kafka.Message // fetched, not yet committed
		r        *sdk.Reader
		revokedC = make(chan struct{}, 1)
	)
	cb := sdk.RebalanceCallbacks{
		Assigned: func(_ context.Context, ps map[string][]int) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, fmt.Sprintf("assigned %v", ps[rig.topic]))
		},
		Revoked: func(ctx context.Context, ps map[string][]int) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, fmt.Sprintf("revoked %v", ps[rig.topic]))
			if err := r.CommitMessages(ctx, pending...); err != nil {
				t.Errorf("CommitMessages in Revoked: %v", err)
			}
			select {
			case revokedC <- struct{}{}:
			default:
			}
		},
	}
	var err error
	r, err = sdk.NewReader(cfg, testOptions(t, sdk.WithRebalanceCallbacks(cb))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(events) != 1 || events[0] != "assigned [0 1]" {
		t.Errorf("events before the first message: %v, want [assigned [0 1]]", events)
	}
	pending = append(pending, m)
	mu.Unlock()

	other, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	select {
	case <-revokedC:
	case <-ctx.Done():
		t.Fatal("Revoked was not called when a second member joined")
	}
	// The commit that follows Revoked holds the message committed in it.
	for {
		resp, err := (&kafka.Client{Addr: kafka.TCP(rig.broker.Addrs()...)}).OffsetFetch(ctx,
			&kafka.OffsetFetchRequest{GroupID: "callbacks", Topics: map[string][]int{rig.topic: {m.Partition}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[rig.topic][0].CommittedOffset; got == m.Offset+1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the offset committed in Revoked (%d) never reached the group", m.Offset+1)
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 2 || events[1] != "revoked [0 1]" {
		t.Errorf("events: %v, want assigned [0 1], revoked [0 1], ...", events)
	}
}

// TestReaderCooperativeSticky: with CooperativeStickyGroupBalancer first, a
// member joining takes partitions from the first without revoking the
// ones it keeps (Revoked gets only the two that move, where an eager
// rebalance revokes all four); a kafka-go Reader, which lists range only,
// still joins the group and is given partitions.
func TestReaderCooperativeSticky(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "coop", 4)
	writeSpread(t, rig, 20)
	cfg := groupTestConfig(rig, "coop")
	cfg.GroupBalancers = []kafka.GroupBalancer{sdk.CooperativeStickyGroupBalancer{}, kafka.RangeGroupBalancer{}}
	type event struct {
		kind  string
		parts []int
	}
	member := func(events chan<- event) *sdk.Reader {
		r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
			Assigned: func(_ context.Context, ps map[string][]int) { events <- event{"assigned", ps[rig.topic]} },
			Revoked:  func(_ context.Context, ps map[string][]int) { events <- event{"revoked", ps[rig.topic]} },
		}))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	ctx := testCtx(t)
	aEvents, bEvents := make(chan event, 32), make(chan event, 32)
	a := member(aEvents)
	if _, err := a.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	if e := <-aEvents; e.kind != "assigned" || len(e.parts) != 4 {
		t.Fatalf("first member: %+v, want all 4 partitions assigned", e)
	}
	b := member(bEvents)
	go func() { _, _ = b.FetchMessage(ctx) }()
	for owned := 0; owned < 2; {
		select {
		case e := <-bEvents:
			owned += len(e.parts)
		case <-ctx.Done():
			t.Fatal("the second member was never given 2 partitions")
		}
	}
	var revoked []int
	for len(aEvents) > 0 {
		if e := <-aEvents; e.kind == "revoked" {
			revoked = append(revoked, e.parts...)
		}
	}
	if len(revoked) != 2 {
		t.Errorf("the first member had %v revoked, want the 2 partitions that moved (an eager rebalance revokes 4)", revoked)
	}
	if n := len(a.Assignment()); n != 2 {
		t.Errorf("the first member owns %d partitions, want 2", n)
	}

	// A kafka-go member joins the cooperative group: the group goes
	// eager (range), and it is given partitions.
	kcfg := cfg
	kcfg.GroupBalancers = []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}
	kr := kafka.NewReader(kcfg)
	defer kr.Close()
	if _, err := kr.FetchMessage(ctx); err != nil {
		t.Fatalf("the kafka-go member read nothing: %v", err)
	}
}

// groupErrors counts the errors that ended the engine's group sessions
// (kgo's HookGroupManageError): the engine calls it right after each call
// of its lost callback, which gets the partitions then owned, if any.
type groupErrors struct {
	n       atomic.Int64
	changed chan struct{}
}

func (h *groupErrors) OnGroupManageError(error) {
	h.n.Add(1)
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// TestReaderLostCallback: a member cut off from the broker loses its
// partitions once its heartbeat fails past the engine's retries, well
// before its session would expire: Lost is called with the partitions it
// owned, and not again (with none) at each failed rejoin that follows.
// Once the broker is reachable again the Reader rejoins and reads a
// message written after the loss. The callback never blocks the engine.
func TestReaderLostCallback(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "lost", 2)
	writeSpread(t, rig, 5)
	cfg := groupTestConfig(rig, "lost")
	var (
		mu    sync.Mutex
		calls []map[string][]int
	)
	lost := make(chan struct{}, 1)
	sessions := &groupErrors{changed: make(chan struct{}, 1)}
	r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithEngineHooks(sessions), sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Lost: func(_ context.Context, ps map[string][]int) {
			mu.Lock()
			calls = append(calls, ps)
			mu.Unlock()
			select {
			case lost <- struct{}{}:
			default:
			}
		},
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	if _, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.Assignment()); n != 2 {
		t.Fatalf("the Reader owns %d partitions, want 2", n)
	}
	if err := rig.proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	rig.proxy.ResetAll()
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("Lost was never called while the broker was unreachable")
	}
	// The session the heartbeat ended, then at least one failed rejoin:
	// the engine's lost callback ran again, with nothing owned.
	for sessions.n.Load() < 2 {
		select {
		case <-sessions.changed:
		case <-ctx.Done():
			t.Fatalf("%d group session errors, want a failed rejoin after the loss", sessions.n.Load())
		}
	}
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	if len(got) != 1 || !slices.Equal(got[0][rig.topic], []int{0, 1}) {
		t.Errorf("Lost calls %v, want one, with partitions [0 1] of %s", got, rig.topic)
	}
	if n := len(r.Assignment()); n != 0 {
		t.Errorf("after Lost the Reader owns %d partitions, want none", n)
	}

	if err := rig.proxy.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	rig.write(t, kafka.Message{Key: []byte{0}, Value: []byte("after-loss")})
	readUntil(ctx, t, r, "after-loss")
}

// readUntil fetches until the message whose value is value.
func readUntil(ctx context.Context, t *testing.T, r *sdk.Reader, value string) {
	t.Helper()
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("no message %q: %v", value, err)
		}
		if string(m.Value) == value {
			return
		}
	}
}

// TestReaderCommitInLost: CommitMessages inside Lost, with the callback's
// ctx, while the broker refuses: the commit returns its error once the
// callback's ctx ends (RebalanceTimeout), and the Reader rejoins and reads
// once the broker is back. Before, the callback's ctx ended only at Close
// and the commit waited for a generation the blocked callback held up.
func TestReaderCommitInLost(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "commit-lost", 1)
	writeSpread(t, rig, 3)
	cfg := groupTestConfig(rig, "commit-lost")
	var (
		self  atomic.Pointer[sdk.Reader]
		first atomic.Pointer[kafka.Message]
	)
	committed := make(chan error, 1)
	r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Lost: func(ctx context.Context, _ map[string][]int) {
			err := self.Load().CommitMessages(ctx, *first.Load())
			select {
			case committed <- err:
			default:
			}
		},
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	self.Store(r)
	ctx := testCtx(t)
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first.Store(&m)
	if err := rig.proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	rig.proxy.ResetAll()
	select {
	case err := <-committed:
		if err == nil {
			t.Error("a commit inside Lost succeeded while the broker refused")
		}
		t.Logf("commit inside Lost: %v", err)
	case <-ctx.Done():
		t.Fatal("the commit inside Lost never returned")
	}
	if err := rig.proxy.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	rig.write(t, kafka.Message{Value: []byte("after-loss")})
	readUntil(ctx, t, r, "after-loss")
}

// TestReaderSeekWhileFetching: Seek while another goroutine fetches. No
// message handed out after Seek returned comes from before the move. The
// fetcher knows, for each message, which seeks had returned when its
// FetchMessage began (d) and which had begun when it returned (s): the
// message is either the next one after the previous message (allowed
// only if that one already came after seek d), or the target of a seek in
// (cur, s], cur being the seek the previous message came after. Targets
// are multiples of gap and the fetcher reads fewer than gap messages per
// seek, so a message is a target or a successor, never both: the check is
// exact. The seeker starts seek j+1 only once the fetcher handed out the
// target of seek j, so that (cur, s] holds one seek at most.
func TestReaderSeekWhileFetching(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "seek-race", 1)
	const (
		gap   = 50
		slots = 40
		seeks = 2000
	)
	writeSpread(t, rig, gap*slots)
	cfg := groupTestConfig(rig, "seek-race")
	cfg.MaxBytes = 8 << 10 // a fetch holds more than a poll takes:
	cfg.QueueCapacity = 4  // the engine keeps records buffered
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	if m, err := r.FetchMessage(ctx); err != nil || m.Offset != 0 {
		t.Fatalf("first message: offset %d (%v), want 0", m.Offset, err)
	}

	targets := make([]int64, seeks+1) // targets[0]: where the Reader started
	var (
		started, done atomic.Int64 // the last seek begun, returned
		reached       atomic.Int64 // the seek the last message came after
		progress      = make(chan struct{}, 1)
		seeked        = make(chan struct{}, 1)
		stale         []string // wrong hand-outs
		fetchErr      error
	)
	notify := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	fctx, stop := context.WithCancel(ctx)
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		cur, want, since := int64(0), int64(1), 1
		for {
			// Fewer than gap messages per seek: wait for the next.
			for since >= gap-1 && done.Load() <= cur {
				select {
				case <-seeked:
				case <-fctx.Done():
					return
				}
			}
			d := done.Load()
			m, err := r.FetchMessage(fctx)
			if err != nil {
				if fctx.Err() == nil {
					fetchErr = err
				}
				return
			}
			s := started.Load()
			switch {
			case s > cur && m.Offset == targets[cur+1]:
				cur, since = cur+1, 0
			case cur >= d && m.Offset == want:
			default:
				stale = append(stale, fmt.Sprintf("offset %d handed out after seek %d to %d returned (last seek begun %d, previous message %d after seek %d)",
					m.Offset, d, targets[d], s, want-1, cur))
				cur, since = s, 0 // go on from there
			}
			want = m.Offset + 1
			since++
			reached.Store(cur)
			notify(progress)
		}
	}()
	for j := int64(1); j <= seeks; j++ {
		targets[j] = (j * 7 % slots) * gap // never the previous target
		started.Store(j)
		if err := r.Seek(ctx, rig.topic, 0, targets[j]); err != nil {
			t.Fatal(err)
		}
		done.Store(j)
		notify(seeked)
		for reached.Load() < j {
			select {
			case <-progress:
			case <-fetched:
				t.Fatalf("the fetcher stopped: %v", fetchErr)
			case <-ctx.Done():
				t.Fatalf("seek %d to %d: the fetcher never handed it out", j, targets[j])
			}
		}
	}
	stop()
	<-fetched
	if fetchErr != nil {
		t.Fatal(fetchErr)
	}
	if len(stale) > 0 {
		t.Errorf("%d of %d seeks handed out messages of before the move; first: %s", len(stale), seeks, stale[0])
	}
}

// TestReaderSeekWithCallersWaiting: a Seek back while several
// FetchMessage calls wait for new messages gets its turn (the callers
// polling in turn kept it out until their ctx ended), and the callers get
// the messages from the new position.
func TestReaderSeekWithCallersWaiting(t *testing.T) {
	t.Parallel()
	const callers = 3
	rig := newFaultRig(t, "seek-waiting", 1)
	writeSpread(t, rig, callers)
	r, err := sdk.NewReader(groupTestConfig(rig, "seek-waiting"), testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range callers {
		if _, err := r.FetchMessage(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	offsets := make(chan int64, callers)
	for range callers {
		go func() {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Errorf("FetchMessage waiting across the Seek: %v", err)
				m.Offset = -1
			}
			offsets <- m.Offset
		}()
	}
	// The callers are polling: the Reader fetched again since.
	r.Stats()
	for fetches := int64(0); fetches < 2; fetches += r.Stats().Fetches {
		if err := retry.SleepContext(ctx, 5*time.Millisecond); err != nil {
			t.Fatal("no fetch while the callers wait")
		}
	}
	if err := r.Seek(ctx, rig.topic, 0, 0); err != nil {
		t.Fatalf("Seek with %d callers waiting: %v", callers, err)
	}
	var got []int64
	for range callers {
		got = append(got, <-offsets)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("the waiting callers got offsets %v after Seek(0), want 0, 1, 2", got)
	}
}

// TestReaderSeekWinsOverFailedCommit: a periodic commit that fails puts
// its marks back for the next one, but not the mark of a partition Seek
// moved meanwhile. Offsets 0-5 are marked (6), the commit of 6 is held at
// the proxy, the Reader seeks back to 2 and marks 2 and 3 (4), then the
// held commit is answered with an error: the group ends at 4, not at the
// 6 the seek back dropped.
func TestReaderSeekWinsOverFailedCommit(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "seek-commit", 1)
	writeSpread(t, rig, 10)
	cfg := groupTestConfig(rig, "seek-commit")
	cfg.CommitInterval = 10 * time.Millisecond
	ctx := testCtx(t)
	held, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	var first atomic.Bool
	rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key != keyOffsetCommit || !first.CompareAndSwap(false, true) {
			return resp
		}
		close(held)
		<-release
		decoded, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			t.Error(err)
			return resp
		}
		cr := decoded.(*kmsg.OffsetCommitResponse)
		for i := range cr.Topics {
			for j := range cr.Topics[i].Partitions {
				cr.Topics[i].Partitions[j].ErrorCode = kerr.OffsetMetadataTooLarge.Code
			}
		}
		return kproxy.EncodeResponse(req, cr)
	})
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fetch := func(k int) []kafka.Message {
		var ms []kafka.Message
		for range k {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		return ms
	}
	// One CommitMessages marks 6: the first commit the Reader sends is
	// that of offset 6.
	if err := r.CommitMessages(ctx, fetch(6)...); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("no periodic commit")
	}
	if err := r.Seek(ctx, rig.topic, 0, 2); err != nil {
		t.Fatal(err)
	}
	ms := fetch(2)
	if ms[0].Offset != 2 || ms[1].Offset != 3 {
		t.Fatalf("after Seek to 2: offsets %d, %d", ms[0].Offset, ms[1].Offset)
	}
	if err := r.CommitMessages(ctx, ms...); err != nil {
		t.Fatal(err)
	}
	close(release)
	// Close waits for the periodic commit in flight (whose failure puts
	// back what it puts back), then commits the marks.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := (&kafka.Client{Addr: kafka.TCP(rig.broker.Addrs()...)}).OffsetFetch(ctx,
		&kafka.OffsetFetchRequest{GroupID: "seek-commit", Topics: map[string][]int{rig.topic: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[rig.topic][0].CommittedOffset; got != 4 {
		t.Errorf("committed offset %d, want 4: the failed commit put back the mark the seek back dropped", got)
	}
}

// TestReaderStaticMembership: the hermetic twin of conformance's
// TestSDKReaderStaticMembership (classic protocol), on the embedded
// broker, which implements KIP-345. Of two members, the second is closed
// and restarted: with the same WithGroupInstanceID, within the session
// timeout, it gets its partition back with no rebalance (the first member
// sees no callback and sends no JoinGroup); a dynamic member's restart
// rebalances (the first is revoked and rejoins). DescribeGroups has no
// generation to compare: the first member's JoinGroups, counted at the
// proxy by its client ID (which holds its session ID), stand for it.
func TestReaderStaticMembership(t *testing.T) {
	t.Parallel()
	for _, static := range []bool{true, false} {
		t.Run(fmt.Sprintf("static=%v", static), func(t *testing.T) {
			t.Parallel()
			group := fmt.Sprintf("static-%v", static)
			rig := newFaultRig(t, group, 2)
			writeSpread(t, rig, 5)
			cfg := groupTestConfig(rig, group)
			// Longer than a restart can take on a loaded machine.
			cfg.SessionTimeout, cfg.RebalanceTimeout = 30*time.Second, 10*time.Second
			ctx := testCtx(t)
			var (
				mu          sync.Mutex
				owned       = map[string]int{}
				firstEvents []string
				firstClient string             // the client ID of the first JoinGroup
				joins       = map[string]int{} // JoinGroups by client ID
			)
			rig.proxy.OnRequest(func(req kproxy.Request) kproxy.Action {
				if req.Key == 11 { // JoinGroup
					mu.Lock()
					if firstClient == "" {
						firstClient = req.ClientID
					}
					joins[req.ClientID]++
					mu.Unlock()
				}
				return kproxy.Forward
			})
			changed := make(chan struct{}, 1)
			member := func(name, id string) *sdk.Reader {
				note := func(kind string, ps map[string][]int, sign int) {
					mu.Lock()
					owned[name] += sign * len(ps[rig.topic])
					if name == "first" {
						firstEvents = append(firstEvents, fmt.Sprint(kind, " ", ps[rig.topic]))
					}
					mu.Unlock()
					notifyOnce(changed)
				}
				cb := sdk.RebalanceCallbacks{
					Assigned: func(_ context.Context, ps map[string][]int) { note("assigned", ps, 1) },
					Revoked:  func(_ context.Context, ps map[string][]int) { note("revoked", ps, -1) },
				}
				opts := []sdk.Option{sdk.WithGroupProtocol(sdk.GroupProtocolClassic), sdk.WithRebalanceCallbacks(cb)}
				if static {
					opts = append(opts, sdk.WithGroupInstanceID(id))
				}
				r, err := sdk.NewReader(cfg, testOptions(t, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					for {
						m, err := r.FetchMessage(ctx)
						if err != nil {
							return
						}
						_ = r.CommitMessages(ctx, m)
					}
				}()
				return r
			}
			until := func(what string, ok func() bool) {
				t.Helper()
				for {
					mu.Lock()
					done := ok()
					mu.Unlock()
					if done {
						return
					}
					select {
					case <-changed:
					case <-ctx.Done():
						t.Fatalf("%s: never (owned %v)", what, owned)
					}
				}
			}
			first := member("first", "first")
			defer first.Close()
			until("the first member owns both partitions", func() bool { return owned["first"] == 2 })
			second := member("second", "second")
			until("each member owns a partition", func() bool { return owned["first"] == 1 && owned["second"] == 1 })
			mu.Lock()
			events0, joins0 := len(firstEvents), joins[firstClient]
			mu.Unlock()

			if err := second.Close(); err != nil {
				t.Fatal(err)
			}
			again := member("restarted", "second")
			defer again.Close()
			until("the restarted member owns a partition", func() bool { return owned["restarted"] == 1 })
			mu.Lock()
			defer mu.Unlock()
			seen, rejoined := firstEvents[events0:], joins[firstClient]-joins0
			revoked := slices.ContainsFunc(seen, func(e string) bool { return strings.HasPrefix(e, "revoked") })
			switch {
			case static && (len(seen) != 0 || rejoined != 0):
				t.Errorf("the static restart rebalanced: the first member saw %v and sent %d JoinGroups", seen, rejoined)
			case !static && (!revoked || rejoined == 0):
				t.Errorf("the dynamic restart did not rebalance: the first member saw %v and sent %d JoinGroups", seen, rejoined)
			}
			t.Logf("static=%v: the first member saw %v and sent %d JoinGroups", static, seen, rejoined)
		})
	}
}

// notifyOnce signals c without blocking.
func notifyOnce(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// TestReaderOutOfRangeRetriedAfterBackoff: with OffsetOutOfRangeError, an
// offset past the log's end is kafka.OffsetOutOfRange at once, and a
// caller that retries at once gets it again only after a backoff each
// time (kafka-go's reader backs off too): a retry loop is not a stream of
// requests to the broker. Once the log reaches the offset the Reader
// reads on from it.
func TestReaderOutOfRangeRetriedAfterBackoff(t *testing.T) {
	rig := newFaultRig(t, "oore-pace", 1)
	writeSpread(t, rig, 3)
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: rig.broker.Addrs(), Topic: rig.topic, OffsetOutOfRangeError: true,
		MaxWait: 100 * time.Millisecond, ReadBackoffMin: 100 * time.Millisecond, ReadBackoffMax: time.Second}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetOffset(5); err != nil {
		t.Fatal(err)
	}
	loop, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	refused := 0
	for loop.Err() == nil {
		_, err := r.FetchMessage(loop)
		switch {
		case errors.Is(err, kafka.OffsetOutOfRange):
			refused++
		case loop.Err() != nil:
		default:
			t.Fatalf("FetchMessage: %v, want kafka.OffsetOutOfRange", err)
		}
	}
	// 100 ms, 200, 400, 800: at most 5 answers in the second; more than
	// that is a caller's loop made into requests.
	if refused < 1 || refused > 5 {
		t.Fatalf("kafka.OffsetOutOfRange %d times in a second of retries, want 1 to 5", refused)
	}
	writeSpread(t, rig, 3)
	m, err := r.FetchMessage(testCtx(t))
	if err != nil || m.Offset != 5 {
		t.Fatalf("once the log reached it: offset %d, %v; want offset 5", m.Offset, err)
	}
}

// TestReaderTopicDeletedAndMadeAgain runs kafka-go's Reader beside the
// SDK's through a topic's deletion and creation again, in partition mode
// and in a group: both read the new topic's messages, from the position
// they had (the engine fetches a topic by its ID, and refuses the new
// one's for good: the Reader waited until its ctx ended).
func TestReaderTopicDeletedAndMadeAgain(t *testing.T) {
	for _, group := range []bool{false, true} {
		for _, impl := range []string{"kafka-go", "sdk"} {
			t.Run(fmt.Sprintf("group=%v/%s", group, impl), func(t *testing.T) {
				rig := newFaultRig(t, "again", 1)
				writeSpread(t, rig, 2)
				cfg := kafka.ReaderConfig{Brokers: rig.broker.Addrs(), Topic: rig.topic, MaxWait: 100 * time.Millisecond}
				if group {
					cfg.GroupID, cfg.StartOffset, cfg.HeartbeatInterval = "again", kafka.FirstOffset, 100*time.Millisecond
					cfg.SessionTimeout, cfg.RebalanceTimeout = 6*time.Second, 6*time.Second
				}
				r := readerOf(t, impl == "sdk", cfg)
				defer r.Close()
				ctx := testCtx(t)
				for i := range 2 {
					m, err := r.ReadMessage(ctx)
					if err != nil || m.Offset != int64(i) {
						t.Fatalf("message %d: offset %d, %v", i, m.Offset, err)
					}
				}
				if err := rig.broker.DeleteTopic(ctx, rig.topic); err != nil {
					t.Fatal(err)
				}
				if err := rig.broker.CreateTopic(ctx, rig.topic, 1); err != nil {
					t.Fatal(err)
				}
				writeSpread(t, rig, 5)
				m, err := r.ReadMessage(ctx)
				t.Logf("after the topic was made again: offset %d %q, %v", m.Offset, m.Value, err)
				if impl == "sdk" && (err != nil || m.Offset != 2 || string(m.Value) != "p0-2") {
					t.Fatalf("after the topic was made again: offset %d %q, %v; want offset 2 p0-2, read where the Reader was", m.Offset, m.Value, err)
				}
			})
		}
	}
}

// TestReaderSetOffsetEndsOutOfRangeBackoff: the backoff before asking
// again for an offset past the log's end (OffsetOutOfRangeError) is a
// poll's wait: SetOffset interrupts it, and the waiting FetchMessage reads
// from the new offset (SetOffset waited out the backoff, up to
// ReadBackoffMax).
func TestReaderSetOffsetEndsOutOfRangeBackoff(t *testing.T) {
	rig := newFaultRig(t, "oore-set", 1)
	writeSpread(t, rig, 3)
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: rig.broker.Addrs(), Topic: rig.topic, OffsetOutOfRangeError: true,
		MaxWait: 100 * time.Millisecond, ReadBackoffMin: time.Minute, ReadBackoffMax: time.Minute}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	if err := r.SetOffset(10); err != nil {
		t.Fatal(err)
	}
	if _, err := r.FetchMessage(ctx); !errors.Is(err, kafka.OffsetOutOfRange) {
		t.Fatalf("FetchMessage past the end: %v, want kafka.OffsetOutOfRange", err)
	}
	type result struct {
		m   kafka.Message
		err error
	}
	fetched := make(chan result, 1)
	go func() {
		m, err := r.FetchMessage(ctx) // waits out the backoff
		fetched <- result{m, err}
	}()
	time.Sleep(100 * time.Millisecond) // the call in its backoff (or not yet: SetOffset first, the same outcome)
	if err := r.SetOffset(1); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-fetched:
		if res.err != nil || res.m.Offset != 1 {
			t.Fatalf("the waiting FetchMessage: offset %d, %v; want offset 1", res.m.Offset, res.err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting FetchMessage did not return after SetOffset")
	}
}

// TestReaderCloseReportsMarksLost: with CommitInterval > 0, a marked
// offset the group takes away before it was committed (the partition
// lost with the session, the broker unreachable) makes Close return an
// error saying so, as a commit Close could not make does: before, Close
// returned nil and the messages were read again by the next owner
// without a word.
func TestReaderCloseReportsMarksLost(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "marks-lost", 1)
	writeSpread(t, rig, 3)
	cfg := groupTestConfig(rig, "marks-lost")
	cfg.CommitInterval = time.Hour
	lost := make(chan struct{})
	var once sync.Once
	r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Lost: func(context.Context, map[string][]int) { once.Do(func() { close(lost) }) },
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CommitMessages(ctx, m); err != nil { // marked, for the hour's commit
		t.Fatal(err)
	}
	if err := rig.proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	rig.proxy.ResetAll()
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("the Reader never lost its partitions")
	}
	err = r.Close()
	if err == nil || !strings.Contains(err.Error(), "not committed") {
		t.Fatalf("Close after the marked offset was lost uncommitted: %v; want an error saying so", err)
	}
	t.Logf("Close: %v", err)
}
