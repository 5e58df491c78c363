//go:build conformance

package conformance

// A rolling upgrade of a consumer group to sdk.ZoneAffinityGroupBalancer on
// the real broker, through to the replacement of the last old member.

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// upgradeGroup is a group as the coordinator describes it.
type upgradeGroup struct {
	state, protocol string
	members         int
	assigned        []int32
}

// describeUpgradeGroup asks the coordinator (the only broker) for the
// group's state, chosen protocol and assignments.
func describeUpgradeGroup(ctx context.Context, addr, group, topic string) (upgradeGroup, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := kproxy.RoundTrip(ctx, addr, "azkafka-conformance", req)
	if err != nil {
		return upgradeGroup{}, err
	}
	groups := resp.(*kmsg.DescribeGroupsResponse).Groups
	if len(groups) != 1 {
		return upgradeGroup{}, fmt.Errorf("DescribeGroups answered %d groups", len(groups))
	}
	g := groups[0]
	out := upgradeGroup{state: g.State, protocol: g.Protocol, members: len(g.Members)}
	for _, m := range g.Members {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err != nil {
			continue // no assignment yet
		}
		for _, tp := range a.Topics {
			if tp.Topic == topic {
				out.assigned = append(out.assigned, tp.Partitions...)
			}
		}
	}
	sort.Slice(out.assigned, func(i, j int) bool { return out.assigned[i] < out.assigned[j] })
	return out, nil
}

// TestZoneAffinityRollingUpgrade: a group of one member on kafka-go's
// default balancers (range, round-robin) gains two members listing
// ZoneAffinityGroupBalancer then range: the group stays on range. The old
// member leaves and a new one takes its place: the group moves to the
// zone-affinity protocol, every partition assigned once, with no
// INCONSISTENT_GROUP_PROTOCOL on the way.
func TestZoneAffinityRollingUpgrade(t *testing.T) {
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("zone-upgrade-%d", time.Now().UnixNano())
	group := topic + "-g"
	const partitions = 6
	createTopic(t, ctx, addrs, topic, partitions)

	reader := func(zone string, balancers ...kafka.GroupBalancer) *sdk.Reader {
		t.Helper()
		r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: addrs, GroupID: group, Topic: topic, GroupBalancers: balancers,
			HeartbeatInterval: 300 * time.Millisecond, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second},
			append(sdkcOptions(), sdk.WithAZ(zone))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	both := func(zone string) []kafka.GroupBalancer {
		return []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{Zone: zone}, kafka.RangeGroupBalancer{}}
	}
	wait := func(what string, members int, protocol string) {
		t.Helper()
		var last upgradeGroup
		var err error
		for {
			last, err = describeUpgradeGroup(ctx, addrs[0], group, topic)
			if err == nil && last.state == "Stable" && last.members == members && last.protocol == protocol && len(last.assigned) == partitions {
				seen := map[int32]bool{}
				for _, p := range last.assigned {
					seen[p] = true
				}
				if len(seen) != partitions {
					t.Fatalf("%s: partitions assigned twice: %v", what, last.assigned)
				}
				t.Logf("%s: %d members, protocol %s, partitions %v", what, members, protocol, last.assigned)
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: never stable with %d members on %s; last %+v (error %v)", what, members, protocol, last, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	old := reader("az-c") // kafka-go's defaults: range, round-robin
	wait("the old member alone", 1, "range")
	reader("az-a", both("az-a")...)
	reader("az-b", both("az-b")...)
	wait("two new members joined the old one", 3, "range")
	if err := old.Close(); err != nil {
		t.Fatalf("closing the old member: %v", err)
	}
	wait("the old member left", 2, sdk.ZoneAffinityProtocol)
	reader("az-c", both("az-c")...)
	wait("its replacement joined", 3, sdk.ZoneAffinityProtocol)
}
