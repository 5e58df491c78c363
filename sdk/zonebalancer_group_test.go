package sdk_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// rackedCluster is a 3-broker embedded cluster behind one proxy per
// broker. Every Metadata and FindCoordinator response names the proxies
// instead of the brokers, and Metadata gives broker n the rack
// rigRacks[n%3] (kfake has no broker.rack), so every client, the
// consumer-group leader included, sees the racks. Partition p of each
// seeded topic is led by broker p%3.
func rackedCluster(t *testing.T, topic string, parts int) (c *embedded.Cluster, addrs []string) {
	t.Helper()
	c = embedded.StartT(t, embedded.Brokers(3), embedded.Topic(topic, parts))
	for i := range parts {
		if err := c.Kfake().MoveTopicPartition(topic, int32(i), int32(i%3)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := (&kafka.Client{Addr: kafka.TCP(c.Addrs()[0])}).Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	front := map[string]string{} // broker address -> its proxy's
	for _, b := range md.Brokers {
		backend := net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		p, err := kproxy.Start(backend, kproxy.AdvertiseSelf(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		front[backend] = p.Addr()
		addrs = append(addrs, p.Addr())
		defer p.OnResponse(func(req kproxy.Request, resp []byte) []byte {
			return rewriteRacks(t, front, req, resp)
		})
	}
	return c, addrs
}

func rewriteRacks(t *testing.T, front map[string]string, req kproxy.Request, resp []byte) []byte {
	if req.Key != 3 && req.Key != 10 { // Metadata, FindCoordinator
		return resp
	}
	r, err := kproxy.DecodeResponse(req, resp)
	if err != nil {
		t.Errorf("decoding response to key %d: %v", req.Key, err)
		return resp
	}
	move := func(host *string, port *int32) {
		if p, ok := front[net.JoinHostPort(*host, strconv.Itoa(int(*port)))]; ok {
			h, ps, _ := net.SplitHostPort(p)
			n, _ := strconv.Atoi(ps)
			*host, *port = h, int32(n)
		}
	}
	switch r := r.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			rack := rigRacks[r.Brokers[i].NodeID%3]
			r.Brokers[i].Rack = &rack
			move(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		move(&r.Host, &r.Port)
		for i := range r.Coordinators {
			move(&r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	}
	return kproxy.EncodeResponse(req, r)
}

func groupReader(t *testing.T, addrs []string, group, topic, zone string, balancers ...kafka.GroupBalancer) *sdk.Reader {
	t.Helper()
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers:           addrs,
		GroupID:           group,
		Topic:             topic,
		GroupBalancers:    balancers,
		HeartbeatInterval: 100 * time.Millisecond,
		// Wide enough that a member of a loaded machine (-race, 2 cores)
		// is never expired: the embedded broker's coordinator, once it has
		// expired a member mid-rebalance, can keep refusing the others
		// with INCONSISTENT_GROUP_PROTOCOL.
		SessionTimeout:   10 * time.Second,
		RebalanceTimeout: 10 * time.Second,
		JoinGroupBackoff: 100 * time.Millisecond,
		ReadBackoffMin:   10 * time.Millisecond,
		ReadBackoffMax:   100 * time.Millisecond,
		ErrorLogger:      deliverytest.Logger(t, zone+": "),
	}, testOptions(t, sdk.WithAZ(zone))...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// groupState is the group as the coordinator describes it.
type groupState struct {
	protocol string
	members  map[string][]int  // client ID -> partitions
	userData map[string][]byte // client ID -> user data of the group's protocol
}

// waitGroup polls DescribeGroups until ok(state) or ctx ends.
func waitGroup(ctx context.Context, t *testing.T, addrs []string, group string, ok func(groupState) bool) groupState {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(addrs...)}
	var last groupState
	for {
		res, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(res.Groups) == 1 && res.Groups[0].GroupState == "Stable" {
			g := res.Groups[0]
			last = groupState{protocol: describedProtocol(ctx, addrs, group), members: map[string][]int{}, userData: map[string][]byte{}}
			for _, m := range g.Members {
				var ps []int
				for _, a := range m.MemberAssignments.Topics {
					ps = append(ps, a.Partitions...)
				}
				slices.Sort(ps)
				last.members[m.ClientID] = ps
				last.userData[m.ClientID] = m.MemberMetadata.UserData
			}
			if ok(last) {
				return last
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never reached the expected state; last seen %+v (err %v)", group, last, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// describedProtocol returns the protocol the group's coordinator chose
// (kafka-go's DescribeGroups leaves it out).
func describedProtocol(ctx context.Context, addrs []string, group string) string {
	r, err := kafka.DefaultTransport.RoundTrip(ctx, kafka.TCP(addrs...), &describegroups.Request{Groups: []string{group}})
	if err != nil {
		return "error: " + err.Error()
	}
	for _, g := range r.(*describegroups.Response).Groups {
		return g.ProtocolData
	}
	return ""
}

// TestZoneAffinityGroup runs a consumer group of three sdk.Readers, one
// per zone, each listing ZoneAffinityGroupBalancer then range, on the
// embedded cluster with racks: the group uses the zone-affinity protocol
// and each member holds exactly the two partitions led in its zone.
func TestZoneAffinityGroup(t *testing.T) {
	t.Parallel()
	const topic, group = "zone-group", "zone-group-g"
	_, addrs := rackedCluster(t, topic, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, zone := range rigRacks {
		r := groupReader(t, addrs, group, topic, zone, sdk.ZoneAffinityGroupBalancer{Zone: zone}, kafka.RangeGroupBalancer{})
		defer r.Close()
	}
	g := waitGroup(ctx, t, addrs, group, func(g groupState) bool { return len(g.members) == 3 })
	if g.protocol != sdk.ZoneAffinityProtocol {
		t.Fatalf("group uses protocol %q, want %s", g.protocol, sdk.ZoneAffinityProtocol)
	}
	for clientID, ps := range g.members {
		var zone string
		for _, z := range rigRacks {
			if strings.Contains(clientID, "warpstream_az="+z) {
				zone = z
			}
		}
		for _, p := range ps {
			if rigRacks[p%3] != zone {
				t.Errorf("member in %s holds partition %d, led in %s: %+v", zone, p, rigRacks[p%3], g)
			}
		}
		if len(ps) != 2 {
			t.Errorf("member in %s holds %v, want 2 partitions", zone, ps)
		}
	}
}

// TestZoneAffinityGroupZoneFromReader: as TestZoneAffinityGroup, but the
// balancers leave Zone empty (two values and a pointer): each Reader sends
// its own AZ (WithAZ, the session's) in the group's user data, and each
// member holds exactly the two partitions led in its zone. The caller's
// pointer is not written.
func TestZoneAffinityGroupZoneFromReader(t *testing.T) {
	t.Parallel()
	const topic, group = "zone-from-reader", "zone-from-reader-g"
	_, addrs := rackedCluster(t, topic, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ptr := &sdk.ZoneAffinityGroupBalancer{}
	for i, zone := range rigRacks {
		var b kafka.GroupBalancer = sdk.ZoneAffinityGroupBalancer{}
		if i == 1 {
			b = ptr
		}
		r := groupReader(t, addrs, group, topic, zone, b, kafka.RangeGroupBalancer{})
		defer r.Close()
		if got := r.Config().GroupBalancers[0]; got != (sdk.ZoneAffinityGroupBalancer{Zone: zone}) {
			t.Errorf("reader in %s: Config().GroupBalancers[0] = %#v, want the zone filled in", zone, got)
		}
	}
	if ptr.Zone != "" {
		t.Errorf("the caller's balancer was written: Zone %q", ptr.Zone)
	}
	g := waitGroup(ctx, t, addrs, group, func(g groupState) bool { return len(g.members) == 3 })
	if g.protocol != sdk.ZoneAffinityProtocol {
		t.Fatalf("group uses protocol %q, want %s", g.protocol, sdk.ZoneAffinityProtocol)
	}
	for clientID, ps := range g.members {
		var zone string
		for _, z := range rigRacks {
			if strings.Contains(clientID, "warpstream_az="+z) {
				zone = z
			}
		}
		want, _ := sdk.ZoneAffinityGroupBalancer{Zone: zone}.UserData()
		if !bytes.Equal(g.userData[clientID], want) {
			t.Errorf("member in %s sent user data %q, want %q", zone, g.userData[clientID], want)
		}
		var led []int
		for p := range 6 {
			if rigRacks[p%3] == zone {
				led = append(led, p)
			}
		}
		if !slices.Equal(ps, led) {
			t.Errorf("member in %s holds %v, want the partitions led there, %v", zone, ps, led)
		}
	}
}

// TestZoneAffinityGroupRollingUpgrade runs a consumer group through a
// rolling upgrade on the embedded cluster: an old member on kafka-go's
// default balancers (range, round-robin), then two members listing
// ZoneAffinityGroupBalancer and range. The group agrees on range; a
// member listing only the new balancer is refused with
// INCONSISTENT_GROUP_PROTOCOL (why both are listed). A group whose
// members all list it takes the zone-affinity protocol: TestZoneAffinityGroup.
// (Replacing the old member within this group is not tested: the embedded
// broker then keeps answering INCONSISTENT_GROUP_PROTOCOL to the
// rejoining members.)
func TestZoneAffinityGroupRollingUpgrade(t *testing.T) {
	t.Parallel()
	const topic, group = "upgrade", "upgrade-g"
	c := embedded.StartT(t, embedded.Brokers(3), embedded.Topic(topic, 6))
	addrs := c.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	both := func(zone string) []kafka.GroupBalancer {
		return []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{Zone: zone}, kafka.RangeGroupBalancer{}}
	}

	old := groupReader(t, addrs, group, topic, "az-c") // kafka-go's default balancers
	waitGroup(ctx, t, addrs, group, func(g groupState) bool { return len(g.members) == 1 })
	for _, zone := range rigRacks[:2] {
		r := groupReader(t, addrs, group, topic, zone, both(zone)...)
		defer r.Close()
	}
	mixed := waitGroup(ctx, t, addrs, group, func(g groupState) bool { return len(g.members) == 3 })
	if mixed.protocol != "range" {
		t.Fatalf("mixed group uses protocol %q, want range", mixed.protocol)
	}

	// A member listing only the new protocol is refused while the old
	// member is in the group.
	refused := make(chan struct{})
	var once sync.Once
	lone, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: group, Brokers: addrs, Topics: []string{topic},
		GroupBalancers:    []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{Zone: "az-c"}},
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		JoinGroupBackoff: 100 * time.Millisecond,
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) {
			if strings.Contains(fmt.Sprintf(f, a...), "Inconsistent Group Protocol") {
				once.Do(func() { close(refused) })
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatalf("a member listing only %s was never refused by a group with a range-only member", sdk.ZoneAffinityProtocol)
	}
	lone.Close()
	old.Close()
}
