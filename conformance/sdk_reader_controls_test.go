//go:build conformance

package conformance

// The Reader's controls kafka-go never had, on the real broker: a group
// member's lag per partition against the broker's own offsets, seeking
// back in a group, pause and resume across a rebalance, static membership
// (a restart within the session timeout causes no rebalance; a dynamic
// member's does), read_committed against a real transactional producer,
// and Health through the cluster going away and coming back.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// controlsOptions are the options of the Readers here.
func controlsOptions(extra ...sdk.Option) []sdk.Option {
	return append([]sdk.Option{sdk.WithAZ("az-a"), sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithGetenv(func(string) string { return "" })}, extra...)
}

// controlsGroup is a group config with quick rebalances.
func controlsGroup(addrs []string, topic, group string) kafka.ReaderConfig {
	return kafka.ReaderConfig{Brokers: addrs, Topic: topic, GroupID: group, MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}
}

// writeEach writes n messages to each of topic's parts partitions, value
// "p<partition>-<i>".
func writeEach(t *testing.T, ctx context.Context, addrs []string, topic string, parts, n int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return int(m.Key[0]) })}
	defer w.Close()
	var msgs []kafka.Message
	for i := range n {
		for p := range parts {
			msgs = append(msgs, kafka.Message{Key: []byte{byte(p)}, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// TestSDKReaderGroupLagAndSeek: a group member's Assignment matches the
// broker's end offsets and its own position (lag = high watermark -
// position, per partition, summed by ReadLag and Lag); a Seek back re-reads
// exactly the range, and the commit after it is of what was read after it.
func TestSDKReaderGroupLagAndSeek(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-controls-lag-%d", time.Now().UnixNano())
	const parts, n, read = 3, 40, 25
	createTopic(t, ctx, addrs, topic, parts)
	writeEach(t, ctx, addrs, topic, parts, n)
	cfg := controlsGroup(addrs, topic, topic)
	cfg.QueueCapacity = 5
	r, err := sdk.NewReader(cfg, controlsOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var last kafka.Message
	for range read {
		if last, err = r.FetchMessage(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.CommitMessages(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	lag, err := r.ReadLag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lag != parts*n-read || r.Lag() != lag || r.Stats().Lag != lag {
		t.Errorf("ReadLag %d, Lag %d, Stats().Lag %d; want %d", lag, r.Lag(), r.Stats().Lag, parts*n-read)
	}
	ends, err := (&kafka.Client{Addr: kafka.TCP(addrs...)}).ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1), kafka.LastOffsetOf(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, p := range r.Assignment() {
		var end int64 = -1
		for _, po := range ends.Topics[topic] {
			if po.Partition == p.Partition {
				end = po.LastOffset
			}
		}
		if p.HighWatermark != end || p.Lag != end-p.Position || p.Committed != p.Position && p.Committed != -1 {
			t.Errorf("%+v: the broker's end offset is %d", p, end)
		}
		sum += p.Lag
	}
	if sum != lag {
		t.Errorf("the partitions' lags sum to %d, ReadLag %d", sum, lag)
	}
	t.Logf("after %d of %d messages: ReadLag %d, %+v", read, parts*n, lag, r.Assignment())

	// Seek back 5 in the last message's partition: the next 5 of it are
	// exactly those again.
	back := max(last.Offset-4, 0)
	if err := r.Seek(ctx, topic, last.Partition, back); err != nil {
		t.Fatal(err)
	}
	var again []int64
	for want := back; want <= last.Offset; {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Partition == last.Partition {
			again = append(again, m.Offset)
			want++
		}
	}
	for i, o := range again {
		if o != back+int64(i) {
			t.Fatalf("after Seek to %d: offsets %v, want %d..%d in order", back, again, back, last.Offset)
		}
	}
}

// TestSDKReaderPauseAcrossRebalance: a paused partition hands out nothing
// through a rebalance (a member joins and leaves), and after Resume every
// message of every partition has been handed out exactly once.
func TestSDKReaderPauseAcrossRebalance(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-controls-pause-%d", time.Now().UnixNano())
	const parts, n = 2, 50
	createTopic(t, ctx, addrs, topic, parts)
	writeEach(t, ctx, addrs, topic, parts, n)
	assigned := make(chan map[string][]int, 16)
	cfg := controlsGroup(addrs, topic, topic)
	cfg.QueueCapacity = 10
	r, err := sdk.NewReader(cfg, controlsOptions(sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Assigned: func(_ context.Context, ps map[string][]int) { assigned <- ps },
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]int{}
	next := map[int]int64{}
	take := func(m kafka.Message) {
		seen[string(m.Value)]++
		if m.Offset != next[m.Partition] {
			t.Fatalf("partition %d: offset %d handed out, want %d", m.Partition, m.Offset, next[m.Partition])
		}
		next[m.Partition] = m.Offset + 1
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		take(m)
	}
	r.Pause(topic, 0)
	for next[1] < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Partition == 0 {
			t.Fatalf("%s of paused partition 0 handed out", m.Value)
		}
		take(m)
	}
	<-assigned
	otherIn := make(chan struct{}, 1)
	other, err := sdk.NewReader(cfg, controlsOptions(sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
		Assigned: func(context.Context, map[string][]int) {
			select {
			case otherIn <- struct{}{}:
			default:
			}
		},
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = other.FetchMessage(ctx) }()
	select {
	case <-otherIn:
	case <-ctx.Done():
		t.Fatal("the second member was never assigned a partition")
	}
	other.Close()
	for back := false; !back; {
		select {
		case ps := <-assigned:
			back = len(ps[topic]) == parts
		case <-ctx.Done():
			t.Fatal("the partitions did not come back")
		}
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	if m, err := r.FetchMessage(short); err == nil {
		t.Fatalf("%s handed out while partition 0 is paused after the rebalance", m.Value)
	}
	cancelShort()
	r.Resume(topic, 0)
	for next[0] < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		take(m)
	}
	if len(seen) != parts*n {
		t.Errorf("%d distinct messages handed out, want %d", len(seen), parts*n)
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("%s handed out %d times", v, c)
		}
	}
}

// TestSDKReaderStaticMembership: a member restarted with the same
// WithGroupInstanceID within the session timeout gets its partition back
// and the other member sees no change of its partitions; with dynamic
// members the same restart moves partitions to the other member. Under
// both group protocols (KIP-345 and KIP-848's static membership).
func TestSDKReaderStaticMembership(t *testing.T) {
	inLane(t, &brokerLane)
	addrs := brokers(t)
	for _, protocol := range []sdk.GroupProtocol{sdk.GroupProtocolClassic, sdk.GroupProtocolConsumer} {
		for _, static := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/static=%v", protocol, static), func(t *testing.T) {
				staticRestart(t, addrs, protocol, static)
			})
		}
	}
}

// staticRestart restarts the second of two members and reports whether the
// first saw its partitions change.
func staticRestart(t *testing.T, addrs []string, protocol sdk.GroupProtocol, static bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-controls-static-%s-%v-%d", protocol, static, time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 2)
	writeEach(t, ctx, addrs, topic, 2, 5)
	cfg := controlsGroup(addrs, topic, topic)
	var mu sync.Mutex
	owned := map[string]int{}
	var firstEvents []string
	changed := make(chan struct{}, 64)
	// member starts a member named name with instance ID id (when static).
	member := func(name, id string) *sdk.Reader {
		opts := controlsOptions(sdk.WithGroupProtocol(protocol), sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
			Assigned: func(_ context.Context, ps map[string][]int) {
				mu.Lock()
				owned[name] += len(ps[topic])
				if name == "first" {
					firstEvents = append(firstEvents, fmt.Sprint("assigned ", ps[topic]))
				}
				mu.Unlock()
				changed <- struct{}{}
			},
			Revoked: func(_ context.Context, ps map[string][]int) {
				mu.Lock()
				owned[name] -= len(ps[topic])
				if name == "first" {
					firstEvents = append(firstEvents, fmt.Sprint("revoked ", ps[topic]))
				}
				mu.Unlock()
				changed <- struct{}{}
			},
		}))
		if static {
			opts = append(opts, sdk.WithGroupInstanceID(id))
		}
		r, err := sdk.NewReader(cfg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		go readAndCommit(ctx, r)
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
				t.Fatalf("%s: never (%v)", what, owned)
			}
		}
	}
	first := member("first", "first")
	defer first.Close()
	until("the first member owns both partitions", func() bool { return owned["first"] == 2 })
	second := member("second", "second")
	until("each member owns a partition", func() bool { return owned["first"] == 1 && owned["second"] == 1 })
	mu.Lock()
	before := len(firstEvents)
	mu.Unlock()

	epoch0 := groupEpoch(t, ctx, addrs, topic, protocol)

	// Restart the second member within the session timeout.
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	again := member("restarted", "second")
	defer again.Close()
	until("the restarted member owns a partition", func() bool { return owned["restarted"] == 1 })
	epoch1 := groupEpoch(t, ctx, addrs, topic, protocol)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case protocol == sdk.GroupProtocolConsumer && static && epoch1 != epoch0:
		t.Errorf("the static restart moved the group epoch from %d to %d", epoch0, epoch1)
	case protocol == sdk.GroupProtocolConsumer && !static && epoch1 <= epoch0:
		t.Errorf("the dynamic restart left the group epoch at %d (was %d)", epoch1, epoch0)
	case protocol == sdk.GroupProtocolClassic && static && len(firstEvents) != before:
		t.Errorf("the first member saw %v after the static restart, want nothing", firstEvents[before:])
	case protocol == sdk.GroupProtocolClassic && !static && len(firstEvents) == before:
		t.Errorf("the dynamic restart did not rebalance the first member")
	}
	t.Logf("%s, static=%v: group epoch %d -> %d; the first member saw %v", protocol, static, epoch0, epoch1, firstEvents[before:])
}

// groupEpoch is the consumer-protocol group's epoch, as the broker
// describes it; -1 for a classic group.
func groupEpoch(t *testing.T, ctx context.Context, addrs []string, group string, protocol sdk.GroupProtocol) int32 {
	t.Helper()
	if protocol != sdk.GroupProtocolConsumer {
		return -1
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("ConsumerGroupDescribe %s: %+v", group, resp.Groups)
	}
	return resp.Groups[0].Epoch
}

// TestSDKReaderReadCommitted: read_committed on Kafka 4.3.1 hands out the
// committed transactions' messages once each and none of the aborted
// one's, written by a real transactional producer (franz-go's).
func TestSDKReaderReadCommitted(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-controls-txn-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []string
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			v := fmt.Sprintf("t%d-%d", i, j)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if end == kgo.TryCommit {
				want = append(want, v)
			}
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, IsolationLevel: kafka.ReadCommitted, MaxWait: 200 * time.Millisecond},
		controlsOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for range want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Value))
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if m, err := r.FetchMessage(short); err == nil {
		got = append(got, string(m.Value))
	}
	if !slices.Equal(got, want) {
		t.Errorf("read committed: %v, want %v", got, want)
	}
	// The last transaction's commit marker is the one offset past the
	// last message: the read past that message took it, so the position
	// is the log's end (see sdk.PartitionState).
	if lag, err := r.ReadLag(ctx); err != nil || lag != 0 {
		t.Errorf("ReadLag after a read past the last committed message: %d, %v; want 0 (past its commit marker)", lag, err)
	}
}

// TestSDKReaderHealth: Health turns unreachable within the documented
// bound (the Reader's MaxWait) of the cluster going away (its proxy refusing and
// resetting every connection) and ok again once it answers.
func TestSDKReaderHealth(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-controls-health-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 1)
	writeEach(t, ctx, addrs, topic, 1, 3)
	p, err := kproxy.Start(addrs[0], kproxy.AdvertiseSelf(true))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := sdk.NewReader(controlsGroup([]string{p.Addr()}, topic, topic), controlsOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	if h := r.Health(); h.State != sdk.HealthOK || h.Assigned != 1 {
		t.Fatalf("after a read: %+v", h)
	}
	if err := p.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	go func() { _, _ = r.FetchMessage(ctx) }()
	down := waitState(t, ctx, r, sdk.HealthUnreachable)
	if err := p.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	up := waitState(t, ctx, r, sdk.HealthOK)
	t.Logf("unreachable since %v (cause %v); ok again at %v", down.Since.Format(time.StampMilli), down.Cause, up.Since.Format(time.StampMilli))
}

// waitState polls r's health until it is state.
func waitState(t *testing.T, ctx context.Context, r *sdk.Reader, state sdk.HealthState) sdk.ReaderHealth {
	t.Helper()
	for {
		if h := r.Health(); h.State == state {
			return h
		}
		select {
		case <-ctx.Done():
			t.Fatalf("health never %s: %+v", state, r.Health())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSDKReaderCooperativeSticky: three members with
// CooperativeStickyGroupBalancer first share six partitions; a fourth
// joins and the partitions revoked across the group are only those that
// move to it (an eager rebalance revokes all six). A kafka-go Reader then
// joins (range only): the group goes eager and the newcomer is given
// partitions.
func TestSDKReaderCooperativeSticky(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("azkafka-controls-coop-%d", time.Now().UnixNano())
	const parts = 6
	createTopic(t, ctx, addrs, topic, parts)
	writeEach(t, ctx, addrs, topic, parts, 20)
	cfg := controlsGroup(addrs, topic, topic)
	cfg.GroupBalancers = []kafka.GroupBalancer{sdk.CooperativeStickyGroupBalancer{}, kafka.RangeGroupBalancer{}}
	var mu sync.Mutex
	owned := map[int]int{} // member -> partitions owned
	revoked := 0
	changed := make(chan struct{}, 64)
	member := func(i int) *sdk.Reader {
		r, err := sdk.NewReader(cfg, controlsOptions(sdk.WithRebalanceCallbacks(sdk.RebalanceCallbacks{
			Assigned: func(_ context.Context, ps map[string][]int) {
				mu.Lock()
				owned[i] += len(ps[topic])
				mu.Unlock()
				changed <- struct{}{}
			},
			Revoked: func(_ context.Context, ps map[string][]int) {
				mu.Lock()
				owned[i] -= len(ps[topic])
				revoked += len(ps[topic])
				mu.Unlock()
				changed <- struct{}{}
			},
		}))...)
		if err != nil {
			t.Fatal(err)
		}
		go readAndCommit(ctx, r)
		return r
	}
	// balanced waits until n members own the partitions evenly.
	balanced := func(n int) {
		t.Helper()
		for {
			mu.Lock()
			ok := len(owned) == n
			for _, o := range owned {
				ok = ok && o == parts/n
			}
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%d members never owned %d partitions each: %v", n, parts/n, owned)
			}
		}
	}
	for i := range 3 {
		defer member(i).Close()
	}
	balanced(3)
	mu.Lock()
	revoked = 0
	mu.Unlock()
	defer member(3).Close()
	for {
		mu.Lock()
		done := owned[3] >= 1 && owned[0]+owned[1]+owned[2]+owned[3] == parts
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the fourth member was never given a partition: %v", owned)
		}
	}
	mu.Lock()
	moved, rev := owned[3], revoked
	mu.Unlock()
	if rev != moved || rev >= parts {
		t.Errorf("a fourth member joined: %d partitions revoked, %d moved to it; want only those that moved (eager: %d)", rev, moved, parts)
	}
	t.Logf("cooperative: a fourth member took %d partitions; %d revoked in the group (eager: %d)", moved, rev, parts)

	kcfg := cfg
	kcfg.GroupBalancers = []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}
	kr := kafka.NewReader(kcfg)
	defer kr.Close()
	writeEach(t, ctx, addrs, topic, parts, 5)
	if _, err := kr.FetchMessage(ctx); err != nil {
		t.Fatalf("a kafka-go member joining the cooperative group read nothing: %v", err)
	}
}

// readAndCommit reads and commits with r, as a group member does, until
// ctx ends or r is closed.
func readAndCommit(ctx context.Context, r *sdk.Reader) {
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return
		}
		_ = r.CommitMessages(ctx, m)
	}
}

// TestSDKTopicRecreated: a topic deleted and created again under a running
// sdk.Writer and sdk.Reader (partition mode and a group) on Kafka 4.3.1:
// the engine fetches and produces by topic ID and refuses the new topic's
// for good; the Writer writes to the new topic after at most one call
// whose messages met the deleted one, and both Readers read it on from
// their position, as kafka-go's, which go by name.
func TestSDKTopicRecreated(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("recreated-%d", time.Now().UnixNano())
	createTopic(t, ctx, addrs, topic, 1)
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addrs...), Topic: topic, RequiredAcks: kafka.RequireAll}, controlsOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 2 {
		if err := w.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "before-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	part, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, MaxWait: 100 * time.Millisecond}, controlsOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	cfg := controlsGroup(addrs, topic, topic)
	cfg.StartOffset = kafka.FirstOffset
	group, err := sdk.NewReader(cfg, controlsOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	for _, r := range []*sdk.Reader{part, group} {
		for i := range 2 {
			if m, err := r.ReadMessage(ctx); err != nil || m.Offset != int64(i) {
				t.Fatalf("before: offset %d, %v", m.Offset, err)
			}
		}
	}

	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 30 * time.Second}
	resp, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}
	for {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err == nil && len(md.Topics) == 1 && errors.Is(md.Topics[0].Error, kafka.UnknownTopicOrPartition) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still in the metadata after its deletion", topic)
		case <-time.After(50 * time.Millisecond):
		}
	}
	createTopic(t, ctx, addrs, topic, 1)

	failed := 0
	for stored := 0; stored < 4; {
		err := w.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "after-%d", stored)})
		if err == nil {
			stored++
			continue
		}
		t.Logf("a call after the topic was made again: %v", err)
		if failed++; failed > 1 || ctx.Err() != nil {
			t.Fatalf("%d calls failed after the topic was made again, the last with %v", failed, err)
		}
	}
	m, err := part.ReadMessage(ctx)
	if err != nil || m.Offset != 2 || string(m.Value) != "after-2" {
		t.Fatalf("partition Reader after: offset %d %q, %v; want offset 2 after-2 (read on from its position)", m.Offset, m.Value, err)
	}
	// Kafka drops a deleted topic's committed offsets from its groups:
	// the group reads the new topic from StartOffset, as kafka-go's
	// would, or from the offset committed before when it asked before
	// Kafka dropped it.
	m, err = group.ReadMessage(ctx)
	if err != nil || !(m.Offset == 0 && string(m.Value) == "after-0" || m.Offset == 2 && string(m.Value) == "after-2") {
		t.Fatalf("group Reader after: offset %d %q, %v; want offset 0 after-0 (StartOffset) or 2 after-2 (the committed offset)", m.Offset, m.Value, err)
	}
}
