//go:build conformance

package conformance

// Zone affinity on a 3-node Kafka 4.3.1 cluster with racks: the bytes a
// Writer in az-a sends to other zones with and without rack-aware
// partitioning, the bytes a consumer group reads from other zones with
// ZoneAffinityGroupBalancer and with kafka-go's range balancer, and the
// affinity a broker restart takes away and what gives it back.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/sdk"
)

// crossZone sums what rc counted to and from racks other than zone, and
// the totals.
func crossZone(rc *deliverytest.RackCounter, zone string) (out, in, totalOut, totalIn int64) {
	for rack, n := range rc.Written() {
		totalOut += n
		if rack != zone {
			out += n
		}
	}
	for rack, n := range rc.Read() {
		totalIn += n
		if rack != zone {
			in += n
		}
	}
	return
}

// perHundredMB scales bytes to a payload of 100 MB.
func perHundredMB(bytes int64, payload int64) float64 {
	return float64(bytes) / float64(payload) * 100
}

// TestClusterZoneAffinity measures, on the cluster with racks az-a, az-b,
// az-c (12 partitions, leaders 4 per rack):
//   - a Writer in az-a writing keyless 1 KiB messages, without and with
//     rack-aware partitioning: the bytes sent to other zones;
//   - three consumers, one per zone, reading everything in a group, with
//     ZoneAffinityGroupBalancer and with kafka-go's range balancer: the
//     bytes read from other zones;
//   - the share of assigned partitions led in their member's zone, in the
//     zone-affinity group, before and after a kill -9 of node 1 (az-a),
//     and once the node is back and the controller's preferred leader
//     election (leader.imbalance.check.interval.seconds, 5 s here, 300 s
//     by default) has given it its leaderships back.
func TestClusterZoneAffinity(t *testing.T) {
	inLane(t, &clusterLane)
	// Kafka's default initial rebalance delay (the template has 0): a
	// new group's first generation waits 3 s after the last join, so the
	// three members created back to back are assigned together. With 0,
	// the first member may be given every partition and read some across
	// zones (and the next owners read them again) before the others join:
	// the measure would be of the join race, not of the balancer.
	c := startCluster(t, clusterConfig{extra: func(int) []string {
		return []string{"leader.imbalance.check.interval.seconds=5", "group.initial.rebalance.delay.ms=3000"}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const topic, partitions, perRun, size = "zone", 12, 10000, 1024
	c.CreateTopic(ctx, topic, partitions)
	rackOf := map[string]string{}
	for i, b := range c.nodes {
		rackOf[b.Addrs()[0]] = clusterRacks[i]
	}
	leaders := c.Leaders(ctx, topic)
	perRack := map[string]int{}
	for _, id := range leaders {
		perRack[clusterRacks[id-1]]++
	}
	t.Logf("partition leaders per rack: %v", perRack)

	value := strings.Repeat("v", size)
	write := func(rackAware bool) (cross, total int64) {
		t.Helper()
		rc := deliverytest.NewRackCounter(rackOf)
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: topic, RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond, Transport: &kafka.Transport{Dial: rc.Dial}},
			append(sdkcOptions(), sdk.WithAZ("az-a"), sdk.WithRackAwarePartitioning(rackAware))...)
		if err != nil {
			t.Fatal(err)
		}
		msgs := make([]kafka.Message, 100)
		for i := range msgs {
			msgs[i] = kafka.Message{Value: []byte(value)}
		}
		for range perRun / len(msgs) {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("WriteMessages (rack-aware %v): %v", rackAware, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		out, _, totalOut, _ := crossZone(rc, "az-a")
		return out, totalOut
	}
	offCross, offTotal := write(false)
	onCross, onTotal := write(true)
	payload := int64(perRun * size)
	t.Logf("Writer in az-a, %d keyless messages of %d B: to other zones %d of %d bytes written (%.1f MB per 100 MB) without rack-aware partitioning; %d of %d (%.1f MB per 100 MB) with it",
		perRun, size, offCross, offTotal, perHundredMB(offCross, payload), onCross, onTotal, perHundredMB(onCross, payload))
	if onCross*10 > offCross {
		t.Fatalf("rack-aware partitioning sent %d bytes to other zones, without it %d: it should save nearly all", onCross, offCross)
	}

	// Three consumers, one per zone, read all 2 × perRun messages.
	type member struct {
		zone string
		r    *sdk.Reader
		rc   *deliverytest.RackCounter
	}
	consume := func(group string, fetchFromFollower bool, balancers func(zone string) []kafka.GroupBalancer) []member {
		t.Helper()
		var members []member
		for _, zone := range clusterRacks {
			rc := deliverytest.NewRackCounter(rackOf)
			r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: group, Topic: topic,
				GroupBalancers: balancers(zone), StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond,
				HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second,
				Dialer: &kafka.Dialer{Timeout: 10 * time.Second, DialFunc: rc.Dial}},
				append(sdkcOptions(), sdk.WithAZ(zone), sdk.WithFetchFromFollower(fetchFromFollower))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			members = append(members, member{zone: zone, r: r, rc: rc})
		}
		var read atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, len(members))
		for _, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for read.Load() < 2*perRun {
					fctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					_, err := m.r.FetchMessage(fctx)
					cancel()
					if err == nil {
						read.Add(1)
						continue
					}
					if ctx.Err() != nil || fctx.Err() == nil {
						errs <- fmt.Errorf("%s member: %w", m.zone, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("consumer group %s: %v", group, err)
		}
		return members
	}
	report := func(name string, members []member) (cross int64) {
		var total int64
		for _, m := range members {
			_, in, _, totalIn := crossZone(m.rc, m.zone)
			cross += in
			total += totalIn
		}
		t.Logf("%s: read from other zones %d of %d bytes (%.1f MB per 100 MB consumed)", name, cross, total, perHundredMB(cross, 2*payload))
		return cross
	}
	// Reading from leaders only (fetch from follower off), as kafka-go
	// does: the zone-affinity balancer keeps reads in-zone where leaders
	// sit, range does not. With fetch from follower (the default when the
	// AZ is known) every member reads from its zone's replica whatever
	// the assignment.
	zoneGroup := consume("zone-affinity", false, func(zone string) []kafka.GroupBalancer {
		return []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{Zone: zone}, kafka.RangeGroupBalancer{}}
	})
	zoneCross := report("leaders only, group with ZoneAffinityGroupBalancer", zoneGroup)
	rangeCross := report("leaders only, group with kafka-go's range balancer", consume("range", false, func(string) []kafka.GroupBalancer {
		return []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}
	}))
	if zoneCross*4 > rangeCross {
		t.Fatalf("the zone-affinity group read %d bytes from other zones, the range group %d", zoneCross, rangeCross)
	}
	fffGroup := consume("range-fff", true, func(string) []kafka.GroupBalancer {
		return []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}
	})
	fffCross := report("fetch from follower, group with kafka-go's range balancer", fffGroup)
	for _, m := range fffGroup {
		_ = m.r.Close()
	}
	if fffCross*100 > 2*payload {
		t.Fatalf("fetching from followers, the range group read %d bytes from other zones: over 1%% of %d", fffCross, 2*payload)
	}

	// The zone-affinity group stays up; node 1 (az-a) goes down and comes
	// back.
	share := func(what string) (local int) {
		t.Helper()
		var last string
		for {
			l, total, members, state, err := c.groupAffinity(ctx, "zone-affinity", topic)
			if err == nil && state == "Stable" && total == partitions && members == len(clusterRacks) {
				t.Logf("zone-affinity group, %s: partitions led in their member's zone %d of %d", what, l, total)
				return l
			}
			last = fmt.Sprintf("state %q, %d members, %d of %d partitions assigned, error %v", state, members, total, partitions, err)
			select {
			case <-ctx.Done():
				t.Fatalf("zone-affinity group, %s: never stable with every partition assigned; last %s", what, last)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	before := share("at the start")
	c.Node(1).Kill9()
	c.WaitLeadersOff(ctx, 1, topic)
	down := share("node 1 (az-a) killed, its leaderships moved")
	c.Node(1).Restart()
	c.WaitFullISR(ctx, topic)
	back := time.Now()
	c.waitFor(ctx, "node 1's preferred leaderships back", func(md *kafka.MetadataResponse) error {
		parts, err := partitionsOf(md, topic)
		if err != nil {
			return err
		}
		for _, p := range parts {
			if p.Leader.ID != leaders[p.ID] {
				return fmt.Errorf("partition %d led by %d, preferred %d", p.ID, p.Leader.ID, leaders[p.ID])
			}
		}
		return nil
	}, topic)
	t.Logf("node 1 back in every ISR; the controller's preferred leader election gave its leaderships back after %v", time.Since(back).Round(time.Second))
	returned := share("node 1's leaderships back (a rebalance during the outage, if any, assigned by the outage's leaders)")
	// returned is recorded, not judged: it is 12 when the group did not
	// rebalance while node 1 was down, fewer when it did (the assignment
	// then followed the outage's leaders). A rebalance (here: the az-c
	// member replaced) assigns by the current leaders again.
	_ = zoneGroup[2].r.Close()
	zoneBalancers := func(zone string) []kafka.GroupBalancer {
		return []kafka.GroupBalancer{sdk.ZoneAffinityGroupBalancer{Zone: zone}, kafka.RangeGroupBalancer{}}
	}
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "zone-affinity", Topic: topic,
		GroupBalancers: zoneBalancers("az-c"), HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second},
		append(sdkcOptions(), sdk.WithAZ("az-c"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	restored := share("after a rebalance (the az-c member replaced)")
	if before != partitions || down >= partitions || restored != partitions {
		t.Fatalf("affinity %d → %d → %d → %d of %d: want all at the start, fewer while node 1 is down, all after a rebalance",
			before, down, returned, restored, partitions)
	}
}

// groupAffinity describes group at its coordinator and counts the
// partitions of topic assigned to a member whose zone (from its client ID)
// is the rack of the partition's leader.
func (c *kafkaCluster) groupAffinity(ctx context.Context, group, topic string) (local, total, members int, state string, err error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(c.LiveAddrs()...), Timeout: 5 * time.Second, Transport: tr}
	fc, err := cl.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err == nil && fc.Error != nil {
		err = fc.Error
	}
	if err != nil {
		return 0, 0, 0, "", fmt.Errorf("FindCoordinator: %w", err)
	}
	coord := net.JoinHostPort(fc.Coordinator.Host, fmt.Sprint(fc.Coordinator.Port))
	res, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{Addr: kafka.TCP(coord), GroupIDs: []string{group}})
	if err != nil {
		return 0, 0, 0, "", fmt.Errorf("DescribeGroups: %w", err)
	}
	if len(res.Groups) != 1 || res.Groups[0].Error != nil {
		return 0, 0, 0, "", fmt.Errorf("DescribeGroups: %+v", res.Groups)
	}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, 0, 0, "", err
	}
	parts, err := partitionsOf(md, topic)
	if err != nil {
		return 0, 0, 0, "", err
	}
	leaderRack := map[int]string{}
	for _, p := range parts {
		if p.Leader.Host != "" {
			leaderRack[p.ID] = clusterRacks[p.Leader.ID-1]
		}
	}
	g := res.Groups[0]
	for _, m := range g.Members {
		zone := ""
		for _, z := range clusterRacks {
			if strings.Contains(m.ClientID, "warpstream_az="+z) {
				zone = z
			}
		}
		for _, a := range m.MemberAssignments.Topics {
			for _, p := range a.Partitions {
				total++
				if leaderRack[p] == zone {
					local++
				}
			}
		}
	}
	return local, total, len(g.Members), g.GroupState, nil
}
