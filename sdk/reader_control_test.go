package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

// writeSpread writes n messages to each of rig's partitions ("p<partition>-<i>").
func writeSpread(t *testing.T, rig *faultRig, n int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
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
	rig := newFaultRig(t, "pause-buffer", 1)
	const n = 30
	writeSpread(t, rig, n)
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: rig.topic, MaxWait: 50 * time.Millisecond,
		QueueCapacity: 100}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)
	log := &offsetLog{t: t}
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	log.add(m)
	if q := r.Stats().QueueLength; q == 0 {
		t.Fatalf("nothing buffered after the first message; the test needs buffered messages")
	}
	r.Pause(rig.topic)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if m, err := r.FetchMessage(short); err == nil {
		t.Fatalf("offset %d handed out while the topic is paused", m.Offset)
	}
	cancel()
	r.Resume(rig.topic)
	for log.next[0] < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.add(m)
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
