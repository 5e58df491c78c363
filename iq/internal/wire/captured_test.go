package wire_test

import (
	"testing"

	"github.com/azkafka/azkafka/iq/internal/wire"
	"github.com/azkafka/azkafka/iq/internal/wire/wiretest"
)

// TestDecodeCapturedKafkaStreams431 decodes what Kafka Streams 4.3.1 wrote
// for one member of the conformance fixture (application.id
// azkafka-iq-dn8zkk57pg0r, instance 127.0.0.1:39771 in az-b).
func TestDecodeCapturedKafkaStreams431(t *testing.T) {
	meta, asg := wiretest.CapturedMember(t)
	sub, err := wire.DecodeConsumerSubscription(meta)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Version != 3 || sub.RackID != "az-b" || sub.GenerationID != 2 || len(sub.Topics) != 4 {
		t.Errorf("subscription %+v", sub)
	}
	si, err := wire.DecodeSubscriptionInfo(sub.UserData)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := si.Endpoint(); si.Version != 11 || si.LatestSupportedVersion != 11 || h != (wire.HostInfo{Host: "127.0.0.1", Port: 39771}) || len(si.TaskOffsetSums) != 7 {
		t.Errorf("SubscriptionInfo %+v", si)
	}
	if az, _ := si.Tag("az"); az != "az-b" {
		t.Errorf("client tag az = %q", az)
	}

	a, err := wire.DecodeConsumerAssignment(asg)
	if err != nil {
		t.Fatal(err)
	}
	ai, err := wire.DecodeAssignmentInfo(a.UserData)
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
}
