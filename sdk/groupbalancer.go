package sdk

// groupbalancer.go runs kafka-go's GroupBalancers as the engine's
// classic-protocol balancers, with kafka-go's member metadata and
// assignment encoding, so that a group can mix sdk.Readers and kafka-go
// Readers.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupBalancer runs a kafka.GroupBalancer in kgo's classic group
// protocol. The protocol name and the member metadata are byte for byte
// what kafka-go sends (version 1, topics, the balancer's user data), and
// the assignment is what a kafka-go leader sends, so a group can mix
// sdk.Readers with raw kafka-go Readers, or move from one to the other
// member by member, with no INCONSISTENT_GROUP_PROTOCOL.
type groupBalancer struct {
	b kafka.GroupBalancer
	// partitions returns the partitions of topics with their leaders and
	// replicas, as kafka-go's leader reads them before AssignGroups.
	partitions func(ctx context.Context, topics []string) ([]kafka.Partition, error)
	onError    func(err error)
}

var _ kgo.GroupBalancer = (*groupBalancer)(nil)

func (g *groupBalancer) ProtocolName() string { return g.b.ProtocolName() }

func (g *groupBalancer) IsCooperative() bool { return false }

func (g *groupBalancer) JoinGroupMetadata(topics []string, _ map[string][]int32, _ int32) []byte {
	ud, err := g.b.UserData()
	if err != nil {
		g.onError(fmt.Errorf("sdk: group balancer %s: user data: %w", g.b.ProtocolName(), err))
		ud = nil
	}
	topics = slices.Clone(topics)
	slices.Sort(topics)
	return encodeMemberMetadata(topics, ud)
}

func (g *groupBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	if len(assignment) == 0 {
		return map[string][]int32{}, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("sdk: malformed group assignment (%d bytes): %w", len(assignment), err)
	}
	m := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		m[t.Topic] = append(m[t.Topic], t.Partitions...)
	}
	return m, nil
}

func (g *groupBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	gm := make([]kafka.GroupMember, 0, len(members))
	topics := map[string]struct{}{}
	for _, m := range members {
		ts, ud, err := decodeMemberMetadata(m.ProtocolMetadata)
		if err != nil {
			return nil, nil, fmt.Errorf("sdk: member %s of the group: %w", m.MemberID, err)
		}
		for _, t := range ts {
			topics[t] = struct{}{}
		}
		gm = append(gm, kafka.GroupMember{ID: m.MemberID, Topics: ts, UserData: ud})
	}
	return &memberBalancer{g: g, members: gm}, topics, nil
}

type memberBalancer struct {
	g       *groupBalancer
	members []kafka.GroupMember
}

// Balance reads the partitions' leaders and replicas (the rack-aware
// balancers need them) and asks the kafka-go balancer. When metadata
// cannot be read, the balancer gets the partitions without leaders, as
// many as kgo counted.
func (b *memberBalancer) Balance(counts map[string]int32) kgo.IntoSyncAssignment {
	topics := make([]string, 0, len(counts))
	for t := range counts {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	ctx, cancel := context.WithTimeout(context.Background(), balanceMetadataTimeout)
	defer cancel()
	ps, err := b.g.partitions(ctx, topics)
	if err != nil {
		b.g.onError(fmt.Errorf("sdk: group balancer %s: reading partition leaders: %w", b.g.b.ProtocolName(), err))
		ps = ps[:0]
		for _, t := range topics {
			for p := range counts[t] {
				ps = append(ps, kafka.Partition{Topic: t, ID: int(p)})
			}
		}
	}
	// Only the partitions kgo counted: a topic the metadata knows more
	// of than the group does waits for the next rebalance, as in kafka-go.
	ps = slices.DeleteFunc(ps, func(p kafka.Partition) bool {
		n, ok := counts[p.Topic]
		return !ok || int32(p.ID) >= n
	})
	return syncAssignment{members: b.members, assigned: b.g.b.AssignGroups(b.members, ps)}
}

// balanceMetadataTimeout bounds the leader's metadata read before it
// assigns.
const balanceMetadataTimeout = 10 * time.Second

type syncAssignment struct {
	members  []kafka.GroupMember
	assigned kafka.GroupMemberAssignments
}

func (s syncAssignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(s.members))
	for _, m := range s.members {
		a := kmsg.ConsumerMemberAssignment{Version: 1}
		byTopic := s.assigned[m.ID]
		topics := make([]string, 0, len(byTopic))
		for t := range byTopic {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			ps := make([]int32, 0, len(byTopic[t]))
			for _, p := range byTopic[t] {
				ps = append(ps, int32(p))
			}
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: ps})
		}
		out = append(out, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.ID, MemberAssignment: a.AppendTo(nil)})
	}
	return out
}

// encodeMemberMetadata encodes the classic consumer protocol's member
// metadata exactly as kafka-go does: version 1, the topics, the user data,
// and nothing after (kafka-go's leader refuses trailing bytes).
func encodeMemberMetadata(topics []string, userData []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	if userData == nil {
		return binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(userData)))
	return append(b, userData...)
}

var errShortMetadata = errors.New("member metadata ends early")

// decodeMemberMetadata reads the topics and user data of any version of
// the classic consumer protocol's member metadata (kafka-go's, Java's v0
// to v3, kgo's), ignoring the fields that follow them. Every length is
// checked against the bytes left.
func decodeMemberMetadata(b []byte) (topics []string, userData []byte, err error) {
	if len(b) < 6 {
		return nil, nil, errShortMetadata
	}
	if v := int16(binary.BigEndian.Uint16(b)); v < 0 {
		return nil, nil, fmt.Errorf("member metadata version %d", v)
	}
	n := int32(binary.BigEndian.Uint32(b[2:]))
	b = b[6:]
	if n < 0 || int(n) > len(b)/2 {
		return nil, nil, fmt.Errorf("member metadata claims %d topics in %d bytes", n, len(b))
	}
	topics = make([]string, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, nil, errShortMetadata
		}
		l := int(int16(binary.BigEndian.Uint16(b)))
		b = b[2:]
		if l < 0 || l > len(b) {
			return nil, nil, fmt.Errorf("member metadata topic name of %d bytes in %d", l, len(b))
		}
		topics = append(topics, string(b[:l]))
		b = b[l:]
	}
	if len(b) < 4 {
		return topics, nil, nil // version 0 with no user data
	}
	l := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	switch {
	case l == -1:
		return topics, nil, nil
	case l < 0 || int(l) > len(b):
		return nil, nil, fmt.Errorf("member metadata user data of %d bytes in %d", l, len(b))
	}
	return topics, slices.Clone(b[:l]), nil
}

// partitionsFromMetadata turns a Metadata response into kafka-go's
// Partitions, with each broker's host, port and rack.
func partitionsFromMetadata(resp *kmsg.MetadataResponse) []kafka.Partition {
	brokers := make(map[int32]kafka.Broker, len(resp.Brokers))
	for _, b := range resp.Brokers {
		kb := kafka.Broker{Host: b.Host, Port: int(b.Port), ID: int(b.NodeID)}
		if b.Rack != nil {
			kb.Rack = *b.Rack
		}
		brokers[b.NodeID] = kb
	}
	broker := func(id int32) kafka.Broker {
		if b, ok := brokers[id]; ok {
			return b
		}
		return kafka.Broker{ID: int(id)}
	}
	list := func(ids []int32) []kafka.Broker {
		out := make([]kafka.Broker, 0, len(ids))
		for _, id := range ids {
			out = append(out, broker(id))
		}
		return out
	}
	var ps []kafka.Partition
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			ps = append(ps, kafka.Partition{
				Topic:           *t.Topic,
				ID:              int(p.Partition),
				Leader:          broker(p.Leader),
				Replicas:        list(p.Replicas),
				Isr:             list(p.ISR),
				OfflineReplicas: list(p.OfflineReplicas),
			})
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].ID < ps[j].ID
	})
	return ps
}

// CooperativeStickyGroupBalancer is KIP-429's cooperative-sticky assignor
// for a Reader's classic group protocol, put first in
// kafka.ReaderConfig.GroupBalancers, with kafka-go's balancers after it:
//
//	GroupBalancers: []kafka.GroupBalancer{sdk.CooperativeStickyGroupBalancer{}, kafka.RangeGroupBalancer{}}
//
// While every member of the group lists it, a rebalance moves only the
// partitions that must move, and the others are read on through it:
// Revoked (RebalanceCallbacks) gets only those that leave the member. A
// member that does not list it (a kafka-go Reader, which has no
// cooperative protocol) still joins: the group then runs the next
// balancer every member lists, eagerly, revoking all partitions at each
// rebalance, as before. It is the engine's (franz-go's) sticky assignor;
// its methods here only name it for kafka-go's interface, and a kafka-go
// Reader must not be given it. Under GroupProtocolConsumer the broker
// assigns, and it is ignored like the others.
type CooperativeStickyGroupBalancer struct{}

// ProtocolName is "cooperative-sticky", as Java's and franz-go's.
func (CooperativeStickyGroupBalancer) ProtocolName() string { return "cooperative-sticky" }

// UserData is nil: the engine writes the member's sticky metadata itself.
func (CooperativeStickyGroupBalancer) UserData() ([]byte, error) { return nil, nil }

// AssignGroups is never called by a Reader, whose engine assigns; a
// kafka-go Reader given it would assign as kafka.RangeGroupBalancer, which
// is not sticky.
func (CooperativeStickyGroupBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	return kafka.RangeGroupBalancer{}.AssignGroups(members, partitions)
}
