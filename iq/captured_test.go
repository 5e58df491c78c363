package iq

import (
	"fmt"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/protocol/describegroups"

	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
	"github.com/azkafka/azkafka/iq/internal/wire/wiretest"
)

// TestBuildClassicCapturedKafkaStreams431 maps and routes the group of
// one member as Kafka Streams 4.3.1 wrote it for the conformance fixture
// (application.id azkafka-iq-dn8zkk57pg0r, instance 127.0.0.1:39771 in
// az-b): a key is routed to the host whose partitions hold it.
func TestBuildClassicCapturedKafkaStreams431(t *testing.T) {
	meta, asg := wiretest.CapturedMember(t)
	const app = "azkafka-iq-dn8zkk57pg0r"
	in, left, right, rekey := "azkafka-iq-input-dn8zkk57pg0r", "azkafka-iq-input-dn8zkk57pg0r-left",
		"azkafka-iq-input-dn8zkk57pg0r-right", app+"-rekey-repartition"
	a, err := wire.DecodeConsumerAssignment(asg)
	if err != nil {
		t.Fatal(err)
	}
	ai, err := wire.DecodeAssignmentInfo(a.UserData)
	if err != nil {
		t.Fatal(err)
	}

	// The group reader maps the stores from this one member.
	topics := map[string]int{in: 6, left: 4, right: 8, rekey: 5,
		app + "-counts-changelog": 6, app + "-rekeyed-changelog": 5, app + "-joined-changelog": 8, app + "-leftcount-changelog": 8}
	g := &describegroups.ResponseGroup{GroupID: app, GroupState: "Stable", ProtocolType: "consumer", ProtocolData: "stream",
		Members: []describegroups.ResponseGroupMember{{MemberID: "m", MemberMetadata: meta, MemberAssignment: asg}}}
	v, err := group.Classic(g, group.Config{AppID: app, Topics: topics, AZTag: "az"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Info.StoreSubtopology["counts"] != "0" || v.Info.StoreSubtopology["rekeyed"] != "1" ||
		!strings.Contains(v.Routing.UnmappedStores["leftcount"], "left: 4") {
		t.Errorf("stores: %v, unmapped %v", v.Info.StoreSubtopology, v.Routing.UnmappedStores)
	}
	snap, err := newSnapshot(groupMetadata(v.Routing))
	if err != nil {
		t.Fatal(err)
	}
	for _, hp := range ai.PartitionsByHost {
		for _, tp := range hp.Partitions {
			if tp.Topic != in {
				continue
			}
			// A key of that partition is routed to that host.
			found := false
			for i := 0; i < 1000 && !found; i++ {
				key := []byte(fmt.Sprint("key-", i))
				if Partition(key, 6) != tp.Partition {
					continue
				}
				found = true
				r, err := snap.Route("counts", key)
				if err != nil || r.Active.HostInfo != HostInfo(hp.Host) {
					t.Errorf("counts partition %d: %+v, %v; want active %s", tp.Partition, r, err, hp.Host)
				}
			}
			if !found {
				t.Fatalf("no key of partition %d among 1000", tp.Partition)
			}
		}
	}
}
