package iq

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/protocol/describegroups"
)

// capturedMember reads a member's bytes captured from Kafka Streams 4.3.1
// (see the file's header).
func capturedMember(t testing.TB, name string) (metadata, assignment []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "metadata "); ok {
			metadata, err = hex.DecodeString(v)
		} else if v, ok := strings.CutPrefix(l, "assignment "); ok {
			assignment, err = hex.DecodeString(v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return metadata, assignment
}

// TestDecodeCapturedKafkaStreams431 decodes what Kafka Streams 4.3.1 wrote
// for one member of the conformance fixture (application.id
// azkafka-iq-dn8zkk57pg0r, instance 127.0.0.1:39771 in az-b).
func TestDecodeCapturedKafkaStreams431(t *testing.T) {
	meta, asg := capturedMember(t, "streams-4.3.1-classic-member.txt")
	const app = "azkafka-iq-dn8zkk57pg0r"
	in, left, right, rekey := "azkafka-iq-input-dn8zkk57pg0r", "azkafka-iq-input-dn8zkk57pg0r-left",
		"azkafka-iq-input-dn8zkk57pg0r-right", app+"-rekey-repartition"

	sub, err := DecodeConsumerSubscription(meta)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Version != 3 || sub.RackID != "az-b" || sub.GenerationID != 2 || len(sub.Topics) != 4 {
		t.Errorf("subscription %+v", sub)
	}
	si, err := DecodeSubscriptionInfo(sub.UserData)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := si.Endpoint(); si.Version != 11 || si.LatestSupportedVersion != 11 || h != (HostInfo{"127.0.0.1", 39771}) || len(si.TaskOffsetSums) != 7 {
		t.Errorf("SubscriptionInfo %+v", si)
	}
	if az, _ := si.Tag("az"); az != "az-b" {
		t.Errorf("client tag az = %q", az)
	}

	a, err := DecodeConsumerAssignment(asg)
	if err != nil {
		t.Fatal(err)
	}
	ai, err := DecodeAssignmentInfo(a.UserData)
	if err != nil {
		t.Fatal(err)
	}
	if ai.Version != 11 || ai.ErrorCode != 0 || len(ai.PartitionsByHost) != 3 || len(ai.StandbyPartitionsByHost) != 3 {
		t.Fatalf("AssignmentInfo %+v", ai)
	}
	// Kafka Streams pairs the sorted assigned partitions with the active
	// tasks: the repartition topic is subtopology 1, the input 0, left and
	// right 2.
	want := []string{"1_1", "1_4", "0_1", "0_4", "2_2", "2_2", "2_5"}
	if len(ai.ActiveTasks) != len(want) || len(a.Partitions) != len(want) {
		t.Fatalf("active tasks %v for partitions %v", ai.ActiveTasks, a.Partitions)
	}
	for i, task := range ai.ActiveTasks {
		if task.String() != want[i] {
			t.Errorf("active task %d = %s, want %s", i, task, want[i])
		}
	}

	// The group reader maps the stores from this one member.
	topics := map[string]int{in: 6, left: 4, right: 8, rekey: 5,
		app + "-counts-changelog": 6, app + "-rekeyed-changelog": 5, app + "-joined-changelog": 8, app + "-leftcount-changelog": 8}
	g := &describegroups.ResponseGroup{GroupID: app, GroupState: "Stable", ProtocolType: "consumer", ProtocolData: "stream",
		Members: []describegroups.ResponseGroupMember{{MemberID: "m", MemberMetadata: meta, MemberAssignment: asg}}}
	v, err := buildClassic(g, buildConfig{appID: app, topics: topics, azTag: "az"})
	if err != nil {
		t.Fatal(err)
	}
	if v.info.StoreSubtopology["counts"] != "0" || v.info.StoreSubtopology["rekeyed"] != "1" ||
		!strings.Contains(v.md.UnmappedStores["leftcount"], "left: 4") {
		t.Errorf("stores: %v, unmapped %v", v.info.StoreSubtopology, v.md.UnmappedStores)
	}
	snap, err := NewSnapshot(v.md)
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
				if err != nil || r.Active.HostInfo != hp.Host {
					t.Errorf("counts partition %d: %+v, %v; want active %s", tp.Partition, r, err, hp.Host)
				}
			}
			if !found {
				t.Fatalf("no key of partition %d among 1000", tp.Partition)
			}
		}
	}
}
