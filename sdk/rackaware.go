package sdk

// rackaware.go is the Writer's rack-aware partitioning
// (WithRackAwarePartitioning): keyless messages go to partitions led in
// the client's AZ, from a view of the leaders' racks kept fresh by a
// Metadata request when it is older than the Transport's MetadataTTL.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rackAwareBalancer wraps the user's kafka.Balancer for rack-aware
// partitioning of keyless messages (what Java's producer calls
// partitioner.rack.aware): a message without a key goes to one of the
// partitions whose leader's rack is the client's AZ, chosen by the user's
// balancer among them; when no leader is in the AZ, among all partitions.
// A message with a key is handed to the user's balancer with every
// partition, so keyed placement never changes.
//
// The leaders' racks come from a Metadata request (refresh) that a write
// of keyless messages makes when the view is older than the Transport's
// MetadataTTL (kafka-go's default, 6 s, when unset): a leader that moved
// is seen at the latest then. kgo's own RackAwarePartitioning does not
// apply: it picks among the rack's partitions itself, where this keeps the
// user's Balancer choosing among them.
//
// Balance is safe for concurrent use as far as the inner balancer is.
type rackAwareBalancer struct {
	inner kafka.Balancer
	topic string // the Writer's Topic, for messages that name none
	az    string
	view  atomic.Pointer[rackView]
}

// rackView is one metadata snapshot: per topic, its partition count and
// the partitions led by a broker of the client's AZ, in increasing order.
type rackView struct {
	topics map[string]rackTopic
}

type rackTopic struct {
	partitions int
	local      []int
	isLocal    []bool // indexed by partition
}

func newRackAwareBalancer(inner kafka.Balancer, topic, az string) *rackAwareBalancer {
	if inner == nil {
		inner = &kafka.RoundRobin{}
	}
	return &rackAwareBalancer{inner: inner, topic: topic, az: az}
}

// Balance implements kafka.Balancer.
func (b *rackAwareBalancer) Balance(msg kafka.Message, partitions ...int) int {
	if len(msg.Key) > 0 {
		return b.inner.Balance(msg, partitions...)
	}
	if local := b.localPartitions(msg.Topic, partitions); len(local) > 0 {
		return b.inner.Balance(msg, local...)
	}
	return b.inner.Balance(msg, partitions...)
}

// localPartitions returns the subset of partitions led in the client's AZ,
// nil when there is none or the racks are unknown. It does not modify
// partitions (kafka-go shares that slice between calls).
func (b *rackAwareBalancer) localPartitions(topic string, partitions []int) []int {
	if topic == "" {
		topic = b.topic
	}
	v := b.view.Load()
	if v == nil {
		return nil
	}
	t, ok := v.topics[topic]
	if !ok || len(t.local) == 0 {
		return nil
	}
	if isIdentity(partitions, t.partitions) {
		return t.local // read only: balancers do not modify their input
	}
	var out []int
	for _, p := range partitions {
		if p >= 0 && p < len(t.isLocal) && t.isLocal[p] {
			out = append(out, p)
		}
	}
	return out
}

// isIdentity reports whether partitions is 0..n-1, which is what the
// Writer passes.
func isIdentity(partitions []int, n int) bool {
	if len(partitions) != n {
		return false
	}
	return n == 0 || (partitions[0] == 0 && partitions[n-1] == n-1)
}

// refresh reads the leaders' racks of topics from the cluster (a seed
// broker first) and makes them the view. On error the previous view stays: the write that follows
// reports the problem.
func (b *rackAwareBalancer) refresh(ctx context.Context, cl *kgo.Client, topics []string) error {
	req := metadataRequest(topics...)
	// The seed brokers first, as kafka-go's Transport asks its Addr; any
	// broker when none of them answers.
	for _, sb := range cl.SeedBrokers() {
		if r, err := sb.Request(ctx, req); err == nil {
			b.view.Store(newRackView(r.(*kmsg.MetadataResponse), b.az))
			return nil
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	b.view.Store(newRackView(resp, b.az))
	return nil
}

// newRackView builds the view of resp for a client in az.
func newRackView(resp *kmsg.MetadataResponse, az string) *rackView {
	local := make(map[int32]bool, len(resp.Brokers))
	for _, br := range resp.Brokers {
		if az != "" && br.Rack != nil && *br.Rack == az {
			local[br.NodeID] = true
		}
	}
	v := &rackView{topics: make(map[string]rackTopic, len(resp.Topics))}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			continue
		}
		n := 0
		for _, p := range t.Partitions {
			if int(p.Partition) >= n {
				n = int(p.Partition) + 1
			}
		}
		rt := rackTopic{partitions: len(t.Partitions), isLocal: make([]bool, n)}
		for _, p := range t.Partitions {
			if p.Leader >= 0 && local[p.Leader] {
				rt.isLocal[p.Partition] = true
			}
		}
		for p, ok := range rt.isLocal {
			if ok {
				rt.local = append(rt.local, p)
			}
		}
		v.topics[*t.Topic] = rt
	}
	return v
}

// keylessTopics returns the topics of the keyless messages of msgs, nil
// when every message has a key.
func keylessTopics(msgs []kafka.Message, writerTopic string) []string {
	var out []string
	for i := range msgs {
		if len(msgs[i].Key) > 0 {
			continue
		}
		t := msgs[i].Topic
		if t == "" {
			t = writerTopic
		}
		if t == "" {
			continue // the write reports the missing topic
		}
		if len(out) == 0 {
			out = []string{t}
			continue
		}
		found := false
		for _, have := range out {
			if have == t {
				found = true
				break
			}
		}
		if !found {
			out = append(out, t)
		}
	}
	return out
}

// refreshRacks refreshes the rack view for the keyless messages of msgs
// when it is older than the Writer's rackTTL or lacks one of their topics.
func (w *Writer) refreshRacks(ctx context.Context, msgs []kafka.Message) {
	topics := keylessTopics(msgs, w.topic)
	if len(topics) == 0 {
		return
	}
	now := time.Now().UnixNano()
	if v := w.rack.view.Load(); v != nil && now-w.rackAt.Load() < int64(w.rackTTL) {
		known := true
		for _, t := range topics {
			if _, ok := v.topics[t]; !ok {
				known = false
			}
		}
		if known {
			return
		}
	}
	if err := w.rack.refresh(ctx, w.engine(), topics); err != nil {
		w.s.logger.Debug("azkafka: rack-aware partitioning: metadata unavailable, keeping the previous leaders", "err", err)
		return
	}
	w.rackAt.Store(now)
}
