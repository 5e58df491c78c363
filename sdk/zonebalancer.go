package sdk

// zonebalancer.go is ZoneAffinityGroupBalancer: a kafka-go GroupBalancer
// that gives each member of a classic group the partitions led in its
// zone, with its zone carried in the member's user data.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/segmentio/kafka-go"
)

// ZoneAffinityProtocol is the consumer-group protocol name of
// ZoneAffinityGroupBalancer.
const ZoneAffinityProtocol = "azkafka-zone-affinity"

// ZoneAffinityGroupBalancer is a kafka.GroupBalancer that gives each
// member of a consumer group the partitions whose leader's rack
// (broker.rack) is the member's zone, as far as the group stays balanced.
// kafka-go fetches from the leader (it has no fetch-from-follower), so a
// partition led in the member's zone is read without cross-zone traffic.
// An sdk.Reader with fetch from follower on (WithFetchFromFollower) reads
// in its zone whatever the assignment; the balancer is for where followers
// cannot serve: fetch from follower off, or brokers without the
// RackAwareReplicaSelector.
//
//	r, err := sdk.NewReader(kafka.ReaderConfig{
//		Brokers: brokers, GroupID: "billing", Topic: "events",
//		GroupBalancers: []kafka.GroupBalancer{
//			sdk.ZoneAffinityGroupBalancer{}, // Zone: the Reader's AZ
//			kafka.RangeGroupBalancer{},      // while members without it remain
//		},
//	})
//
// Zone left empty: NewReader gives the balancer (a value or a pointer in
// ReaderConfig.GroupBalancers) its own AZ, the one its client ID carries
// (WithAZ, AZKAFKA_AZ, else detected); it replaces the element in its copy
// of the config, so the caller's slice and balancer are left as they are,
// and Reader.Config shows the zone. A Zone that is set is kept. When the
// AZ is unknown the member has no zone. With kafka-go's own Reader or
// ConsumerGroup (say on NewAZAwareDialer) nothing fills it: build the
// balancer with NewZoneAffinityGroupBalancer, which resolves the AZ the
// same way.
//
// The assignment, per topic:
//   - balanced: every member gets ⌊P/M⌋ or ⌈P/M⌉ of the topic's P
//     partitions (M members subscribed to it), whatever the zones;
//   - zone first: a partition goes to a member of its leader's zone while
//     one has room; the others, and the partitions whose leader's zone has
//     no member, fill the remaining room. Members without a zone (Zone "")
//     get a fair share of those;
//   - deterministic and sticky: it depends only on the members' IDs and
//     zones and the partitions' leaders, never on their order or a map's,
//     and a member keeps its partitions across rebalances as long as the
//     group, its zones and the leaders do not change; when a member joins
//     or leaves, most partitions stay where they were (rendezvous hashing
//     of member ID and partition, within the quotas: in random groups of
//     1 to 8 members and up to 40 partitions, a joining member moved 37%
//     of the partitions, the new member's own share included).
//
// Leaders move (elections, broker restarts); the assignment follows them
// at the next rebalance only.
//
// Rolling upgrade: list ZoneAffinityGroupBalancer first and the protocol
// the old members use (kafka-go's default lists "range" first) after it.
// The coordinator picks a protocol every member lists, so the group uses
// "range" until the last old member is gone and this balancer from the
// next rebalance on; a member listing only this balancer would be refused
// with INCONSISTENT_GROUP_PROTOCOL while an old member is in the group.
//
// The member's zone travels in the group protocol's user data (a version
// byte, then the zone as a length-prefixed string); user data that does
// not parse counts as no zone. A Zone given by hand should be the
// client's AZ as sdk reports it (Writer.Stats().SDK.AZ or the AZKAFKA_AZ
// the service was given); on MSK the racks are zone IDs, so use
// AZKAFKA_AZ_FORMAT=id.
type ZoneAffinityGroupBalancer struct {
	// Zone is this member's zone; "" means unknown, or, in an sdk.Reader's
	// config, the Reader's AZ.
	Zone string
}

// NewZoneAffinityGroupBalancer returns a ZoneAffinityGroupBalancer whose
// Zone is the AZ a client built with opts would send: WithAZ, else
// AZKAFKA_AZ (or WARPSTREAM_AVAILABILITY_ZONE), else detection with
// azdetect (once per process, within AZKAFKA_DETECT_TIMEOUT). Use it with
// kafka-go's own Reader or ConsumerGroup; an sdk.Reader fills an empty
// Zone itself. Pass it the options given to NewAZAwareDialer (of them,
// WithAZ, WithGetenv, WithDetector and WithLogger count here), so that the
// zone is the one the dialer's client ID carries:
//
//	b, err := sdk.NewZoneAffinityGroupBalancer()
//	dialer, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 10 * time.Second})
//	r := kafka.NewReader(kafka.ReaderConfig{
//		Brokers: brokers, GroupID: "billing", Topic: "events", Dialer: dialer,
//		GroupBalancers: []kafka.GroupBalancer{b, kafka.RangeGroupBalancer{}},
//	})
//
// An unknown AZ is not an error: Zone is "" (the member gets a fair share
// of the partitions no zone claims) and a warning is logged once per
// process, as for every client. The error is that of invalid
// configuration, naming the option or variable.
func NewZoneAffinityGroupBalancer(opts ...Option) (ZoneAffinityGroupBalancer, error) {
	id, err := ResolveIdentity(context.Background(), opts...)
	if err != nil {
		return ZoneAffinityGroupBalancer{}, err
	}
	return ZoneAffinityGroupBalancer{Zone: id.AZ}, nil
}

// withZone returns bs with every ZoneAffinityGroupBalancer whose Zone is
// empty (a value, a pointer, or a nil pointer) replaced by one in zone. bs
// is copied before the first change: the caller's slice and balancers are
// not written.
func withZone(bs []kafka.GroupBalancer, zone string) []kafka.GroupBalancer {
	if zone == "" {
		return bs
	}
	out, copied := bs, false
	for i, b := range bs {
		switch v := b.(type) {
		case ZoneAffinityGroupBalancer:
			if v.Zone != "" {
				continue
			}
		case *ZoneAffinityGroupBalancer:
			if v != nil && v.Zone != "" {
				continue
			}
		default:
			continue
		}
		if !copied {
			out, copied = slices.Clone(bs), true
		}
		out[i] = ZoneAffinityGroupBalancer{Zone: zone}
	}
	return out
}

// ProtocolName implements kafka.GroupBalancer.
func (ZoneAffinityGroupBalancer) ProtocolName() string { return ZoneAffinityProtocol }

// UserData implements kafka.GroupBalancer: the member's zone.
func (b ZoneAffinityGroupBalancer) UserData() ([]byte, error) {
	return encodeZoneUserData(b.Zone)
}

const zoneUserDataVersion = 1

func encodeZoneUserData(zone string) ([]byte, error) {
	if len(zone) > 255 {
		return nil, fmt.Errorf("sdk: ZoneAffinityGroupBalancer.Zone %s: longer than 255 bytes", quote(zone))
	}
	out := make([]byte, 0, 3+len(zone))
	out = append(out, zoneUserDataVersion)
	out = binary.BigEndian.AppendUint16(out, uint16(len(zone)))
	return append(out, zone...), nil
}

// decodeZoneUserData returns the zone carried in b. Later versions may
// append fields after the zone; they are ignored.
func decodeZoneUserData(b []byte) (string, error) {
	if len(b) == 0 {
		return "", errors.New("no user data")
	}
	if b[0] < zoneUserDataVersion {
		return "", fmt.Errorf("zone user data version %d, want >= %d", b[0], zoneUserDataVersion)
	}
	if len(b) < 3 {
		return "", fmt.Errorf("zone user data of %d bytes: truncated length", len(b))
	}
	n := int(binary.BigEndian.Uint16(b[1:3]))
	if n > 255 {
		return "", fmt.Errorf("zone user data: zone of %d bytes, at most 255 allowed", n)
	}
	if len(b) < 3+n {
		return "", fmt.Errorf("zone user data: zone of %d bytes, %d present", n, len(b)-3)
	}
	return string(b[3 : 3+n]), nil
}

// AssignGroups implements kafka.GroupBalancer.
func (ZoneAffinityGroupBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	out := kafka.GroupMemberAssignments{}
	zones := make(map[string]string, len(members))
	byTopic := map[string][]string{}
	for _, m := range members {
		zone, _ := decodeZoneUserData(m.UserData)
		zones[m.ID] = zone
		out[m.ID] = map[string][]int{}
		for _, t := range m.Topics {
			if !slices.Contains(byTopic[t], m.ID) {
				byTopic[t] = append(byTopic[t], m.ID)
			}
		}
	}
	parts := map[string][]kafka.Partition{}
	for _, p := range partitions {
		parts[p.Topic] = append(parts[p.Topic], p)
	}
	for topic, ids := range byTopic {
		slices.Sort(ids)
		ps := parts[topic]
		slices.SortFunc(ps, func(a, b kafka.Partition) int { return a.ID - b.ID })
		for i, owner := range assignZoneTopic(topic, ids, zones, ps) {
			out[owner][topic] = append(out[owner][topic], ps[i].ID)
		}
	}
	return out
}

// assignZoneTopic returns the owner of each of ps (sorted by ID) among
// ids (sorted).
func assignZoneTopic(topic string, ids []string, zones map[string]string, ps []kafka.Partition) []string {
	owners := make([]string, len(ps))
	if len(ids) == 0 {
		return owners
	}
	base, extra := len(ps)/len(ids), len(ps)%len(ids)
	count := make(map[string]int, len(ids))
	// take gives p to the best-ranked member of cands that has room.
	take := func(pi int, cands []string) bool {
		best, bestScore := "", uint64(0)
		for _, id := range cands {
			c := count[id]
			if c > base || (c == base && extra == 0) {
				continue
			}
			if s := rendezvous(id, topic, ps[pi].ID); best == "" || s > bestScore {
				best, bestScore = id, s
			}
		}
		if best == "" {
			return false
		}
		if count[best] == base {
			extra--
		}
		count[best]++
		owners[pi] = best
		return true
	}
	// Zone first: the partitions whose leader's zone has members.
	byZone := map[string][]string{}
	for _, id := range ids {
		if z := zones[id]; z != "" {
			byZone[z] = append(byZone[z], id)
		}
	}
	// Fill to the base quota in zone first, then place extras, so that a
	// zone's extras do not use up room another zone's members need.
	for pass := range 2 {
		for pi, p := range ps {
			local := byZone[p.Leader.Rack]
			if owners[pi] != "" || len(local) == 0 {
				continue
			}
			if pass == 0 {
				saved := extra
				extra = 0
				take(pi, local)
				extra = saved
			} else {
				take(pi, local)
			}
		}
	}
	for pi := range ps {
		if owners[pi] == "" {
			take(pi, ids)
		}
	}
	return owners
}

// rendezvous is the score of member id for a partition: the member with
// the highest score among those with room takes it.
func rendezvous(id, topic string, partition int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(topic))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(partition))
	h.Write(b[:])
	return h.Sum64()
}
