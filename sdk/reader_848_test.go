package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// groupMember is a Reader of a group reading in its own goroutine with
// ReadMessage (synchronous commits), counting what it read.
type groupMember struct {
	r    *sdk.Reader
	done chan error

	mu   sync.Mutex
	read int
}

// consumerGroup is the members' shared view of what was read.
type consumerGroup struct {
	mu     sync.Mutex
	values map[string]int
}

func (g *consumerGroup) start(t *testing.T, cfg kafka.ReaderConfig, opts ...sdk.Option) *groupMember {
	t.Helper()
	r, err := sdk.NewReader(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{r: r, done: make(chan error, 1)}
	go func() {
		for {
			msg, err := r.ReadMessage(context.Background())
			if msg.Value != nil { // fetched, even if its commit failed
				g.mu.Lock()
				g.values[string(msg.Value)]++
				g.mu.Unlock()
				m.mu.Lock()
				m.read++
				m.mu.Unlock()
			}
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
					err = nil
				}
				m.done <- err
				return
			}
		}
	}()
	return m
}

func (m *groupMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.read
}

// close closes the member's Reader and waits for its reads to end.
func (m *groupMember) close(t *testing.T) {
	t.Helper()
	if err := m.r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-m.done; err != nil {
		t.Errorf("ReadMessage: %v", err)
	}
}

func (g *consumerGroup) lost(sent []kafka.Message) (lost, dups int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return deliverytest.LostAndDuplicated(sent, g.values)
}

// waitFor polls cond every 20 ms until it holds, failing the test when
// ctx ends first.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), state)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// describeConsumerGroup asks for group with ConsumerGroupDescribe.
func describeConsumerGroup(ctx context.Context, cl *kgo.Client, group string) (kmsg.ConsumerGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, err
	}
	if len(resp.Groups) != 1 {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	return resp.Groups[0], nil
}

// reconciled reports whether g has n members, each holding its target
// assignment, together holding parts partitions.
func reconciled(g kmsg.ConsumerGroupDescribeResponseGroup, n, parts int) (bool, string) {
	held := 0
	state := fmt.Sprintf("error %d, state %s, epoch %d, %d members:", g.ErrorCode, g.State, g.Epoch, len(g.Members))
	ok := g.ErrorCode == 0 && len(g.Members) == n
	for _, m := range g.Members {
		got, want := 0, 0
		for _, t := range m.Assignment.TopicPartitions {
			got += len(t.Partitions)
		}
		for _, t := range m.TargetAssignment.TopicPartitions {
			want += len(t.Partitions)
		}
		held += got
		state += fmt.Sprintf(" %s holds %d of %d;", m.ClientID, got, want)
		ok = ok && got == want && got > 0
	}
	return ok && held == parts, state
}

// TestReaderConsumerProtocolGroup: Readers on KIP-848's consumer protocol
// share a group on the embedded broker while they read: two join a member
// that is reading, then one leaves with Close. No message may be lost,
// the group's commits must reach the end of every partition, the broker
// must describe the group as a consumer-protocol group assigning with
// uniform (Kafka's default: the config sets no GroupBalancers), and Stats
// must say so.
func TestReaderConsumerProtocolGroup(t *testing.T) {
	t.Parallel()
	const (
		topic = "kip848"
		parts = 6
		chunk = 1000
	)
	c := embedded.StartT(t, embedded.Topic(topic, parts), embedded.KfakeOptions(
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"})))
	check := deliverytest.Topic{Addrs: c.Addrs(), Name: topic, Partitions: parts}
	sent := deliverytest.Messages("kip848", 3*chunk)
	produce := func(msgs []kafka.Message) {
		w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(c.Addrs()...), Topic: topic, Balancer: &kafka.Hash{},
			RequiredAcks: kafka.RequireAll, BatchSize: 50, BatchTimeout: time.Millisecond}
		defer w.Close()
		if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
			t.Fatalf("producing: %v", err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const groupID = "kip848-group"
	cfg := kafka.ReaderConfig{
		Brokers:        c.Addrs(),
		GroupID:        groupID,
		Topic:          topic,
		MaxWait:        100 * time.Millisecond,
		MaxBytes:       4 << 10,
		ReadBackoffMin: 10 * time.Millisecond,
		ReadBackoffMax: 100 * time.Millisecond,
	}
	g := &consumerGroup{values: map[string]int{}}
	member := func(name string) *groupMember {
		cfg := cfg
		cfg.Dialer = &kafka.Dialer{ClientID: name}
		return g.start(t, cfg, testOptions(t, sdk.WithGroupProtocol(sdk.GroupProtocolConsumer))...)
	}
	describe := func(n int) func() (bool, string) {
		return func() (bool, string) {
			d, err := describeConsumerGroup(ctx, cl, groupID)
			if err != nil {
				return false, err.Error()
			}
			return reconciled(d, n, parts)
		}
	}
	allRead := func(upTo int) func() (bool, string) {
		return func() (bool, string) {
			lost, _ := g.lost(sent[:upTo])
			return lost == 0, fmt.Sprintf("%d of %d not read", lost, upTo)
		}
	}

	produce(sent[:chunk])
	a := member("a")
	waitFor(ctx, t, "a to read", func() (bool, string) { return a.count() >= chunk/4, fmt.Sprint(a.count()) })
	b, cm := member("b"), member("c")
	waitFor(ctx, t, "three members holding their assignments", describe(3))
	produce(sent[chunk : 2*chunk])
	waitFor(ctx, t, "b and c to read", func() (bool, string) {
		return b.count() > 0 && cm.count() > 0, fmt.Sprintf("b %d, c %d", b.count(), cm.count())
	})
	waitFor(ctx, t, "the first two chunks read", allRead(2*chunk))

	d, err := describeConsumerGroup(ctx, cl, groupID)
	if err != nil {
		t.Fatal(err)
	}
	if d.ErrorCode != 0 || d.AssignorName != "uniform" {
		t.Errorf("ConsumerGroupDescribe: error code %d, assignor %q; want a consumer-protocol group assigning with Kafka's default, uniform (no GroupBalancers set)", d.ErrorCode, d.AssignorName)
	}
	for _, m := range []*groupMember{a, b, cm} {
		if p := m.r.Stats().SDK.GroupProtocol; p != sdk.GroupProtocolConsumer {
			t.Errorf("Stats().SDK.GroupProtocol = %q, want %q", p, sdk.GroupProtocolConsumer)
		}
	}

	b.close(t)
	waitFor(ctx, t, "two members holding every partition", describe(2))
	produce(sent[2*chunk:])
	waitFor(ctx, t, "every chunk read", allRead(len(sent)))
	waitFor(ctx, t, "commits at the end of every partition", func() (bool, string) {
		end := deliverytest.EndOffsets(ctx, t, check)
		resp, err := (&kafka.Client{Addr: kafka.TCP(c.Addrs()...)}).OffsetFetch(ctx,
			&kafka.OffsetFetchRequest{GroupID: groupID, Topics: map[string][]int{topic: {0, 1, 2, 3, 4, 5}}})
		if err != nil {
			return false, err.Error()
		}
		at := map[int]int64{}
		for _, po := range resp.Topics[topic] {
			at[po.Partition] = po.CommittedOffset
		}
		for p, e := range end {
			if at[p] != e {
				return false, fmt.Sprintf("committed %v, end %v", at, end)
			}
		}
		return true, ""
	})
	a.close(t)
	cm.close(t)
	lost, dups := g.lost(sent)
	t.Logf("read by a %d, b %d, c %d; lost %d, duplicates %d", a.count(), b.count(), cm.count(), lost, dups)
	if lost != 0 {
		t.Errorf("%d of %d messages never read", lost, len(sent))
	}
	deliverytest.RequireCommittedToEnd(testCtx(t), t, check, groupID)
	if d, err := describeConsumerGroup(testCtx(t), cl, groupID); err != nil || d.ErrorCode != 0 || len(d.Members) != 0 {
		t.Errorf("after every Close: ConsumerGroupDescribe = %d members, error code %d, %v; want an empty consumer group", len(d.Members), d.ErrorCode, err)
	}
}

// TestReaderConsumerProtocolStaleEpochCommit: under KIP-848, a commit sent
// with the member's epoch just before another member joined (for another
// topic: this member's partitions stay) is refused STALE_MEMBER_EPOCH, as a
// Kafka without KIP-1251's check of each partition answers (the broker here
// answers so for the first commit); it is made again once the member has
// its new epoch, not after the RebalanceTimeout.
func TestReaderConsumerProtocolStaleEpochCommit(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 1), embedded.Topic("o", 1), embedded.KfakeOptions(
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"})))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: "t", Value: []byte("x")}, kafka.Message{Topic: "t", Value: []byte("y")},
		kafka.Message{Topic: "o", Value: []byte("z")}); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		RebalanceTimeout: time.Minute, Dialer: &kafka.Dialer{ClientID: "a"}}
	opts := testOptions(t, sdk.WithGroupProtocol(sdk.GroupProtocolConsumer))
	a, err := sdk.NewReader(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m0, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CommitMessages(testCtx(t), m0); err != nil {
		t.Fatal(err)
	}
	m1, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// The next commit is held at the broker until a's epoch moved, then
	// refused as stale.
	var sent atomic.Pointer[kmsg.OffsetCommitRequest]
	arrived, moved := make(chan struct{}), make(chan struct{})
	k := c.Kfake()
	k.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		oc := req.(*kmsg.OffsetCommitRequest)
		if !sent.CompareAndSwap(nil, oc) {
			return nil, nil, false
		}
		close(arrived)
		k.SleepControl(func() { <-moved })
		resp := oc.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range oc.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.StaleMemberEpoch.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 15*time.Second) // far below the RebalanceTimeout
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.CommitMessages(ctx, m1) }()
	<-arrived
	cfgB := cfg
	cfgB.Topic, cfgB.GroupTopics, cfgB.Dialer = "", []string{"o"}, &kafka.Dialer{ClientID: "b"}
	b, err := sdk.NewReader(cfgB, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.FetchMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for epoch := int32(-1); epoch <= sent.Load().Generation; {
		d, err := describeConsumerGroup(testCtx(t), cl, "g")
		if err != nil {
			t.Fatal(err)
		}
		for _, mb := range d.Members {
			if mb.MemberID == sent.Load().MemberID {
				epoch = mb.MemberEpoch
			}
		}
		if err := retry.SleepContext(ctx, 20*time.Millisecond); err != nil {
			t.Fatal("a's member epoch did not move")
		}
	}
	close(moved)
	if err := <-done; err != nil {
		t.Fatalf("a commit of a partition a kept all along, refused as stale once: %v", err)
	}
	if got := groupCommitted(t, c, "g", "t", 0); got != 2 {
		t.Fatalf("committed %d, want 2", got)
	}
}
