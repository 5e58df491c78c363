package wire_test

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/iq/internal/wire"
	"github.com/azkafka/azkafka/iq/internal/wire/wiretest"
)

func sampleAssignmentInfo(version int32) *wire.AssignmentInfo {
	a := &wire.AssignmentInfo{
		Version:                version,
		LatestSupportedVersion: -1,
		ActiveTasks:            []wire.TaskID{{Subtopology: 0, Partition: 1}, {Subtopology: 1, Partition: 3}},
		StandbyTasks: []wire.StandbyTask{
			{wire.TaskID{Subtopology: 0, Partition: 2}, []wire.TopicPartition{{"app-counts-changelog", 2}}},
		},
	}
	if version >= 2 {
		a.PartitionsByHost = []wire.HostPartitions{
			{wire.HostInfo{"10.0.0.1", 7070}, []wire.TopicPartition{{"left", 1}, {"right", 5}, {"app-counts-changelog", 1}}},
			{wire.HostInfo{"höst-ü", 7071}, []wire.TopicPartition{{"left", 0}}},
		}
	}
	if version >= 3 {
		a.LatestSupportedVersion = wire.StreamsProtocolLatest
	}
	if version >= 4 {
		a.ErrorCode = 0
	}
	if version >= 6 {
		a.StandbyPartitionsByHost = []wire.HostPartitions{
			{wire.HostInfo{"10.0.0.1", 7070}, []wire.TopicPartition{{"left", 0}}},
		}
	}
	if version >= 7 {
		a.NextRebalanceMs = 1_700_000_000_000
	}
	if version >= 10 {
		a.ActiveTasks[1].Topology = "named-\U0001F600"
	}
	return a
}

func TestDecodeAssignmentInfoAllVersions(t *testing.T) {
	for v := int32(1); v <= wire.StreamsProtocolLatest; v++ {
		want := sampleAssignmentInfo(v)
		got, err := wire.DecodeAssignmentInfo(wiretest.EncodeAssignmentInfo(want))
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if !reflect.DeepEqual(normAI(got), normAI(want)) {
			t.Errorf("version %d:\n got %+v\nwant %+v", v, got, want)
		}
	}
}

// normAI turns empty slices into nil so that DeepEqual compares content.
func normAI(a *wire.AssignmentInfo) wire.AssignmentInfo {
	c := *a
	if len(c.ActiveTasks) == 0 {
		c.ActiveTasks = nil
	}
	if len(c.StandbyTasks) == 0 {
		c.StandbyTasks = nil
	}
	if len(c.PartitionsByHost) == 0 {
		c.PartitionsByHost = nil
	}
	if len(c.StandbyPartitionsByHost) == 0 {
		c.StandbyPartitionsByHost = nil
	}
	return c
}

// assignmentInfoV11Hex is an AssignmentInfo v11 written out by hand field by
// field from AssignmentInfo.encode (not by the test encoder): one active
// task 0_1, no standby, dictionary {0: "in"}, host "h":7 with in-1, no
// standby partitions, error 0, next rebalance 5.
const assignmentInfoV11Hex = "0000000b" + "0000000b" + // version, latest supported
	"00000001" + "00000000" + "00000001" + "00000000" + // 1 active task: 0_1, no named topology
	"00000000" + // no standby tasks
	"00000001" + "00000000" + "0002" + "696e" + // dictionary: 0 -> "in"
	"00000001" + "0001" + "68" + "00000007" + "00000001" + "00000000" + "00000001" + // h:7 -> [in-1]
	"00000000" + // standby partitions by host: none
	"00000000" + "0000000000000005" // error code, next rebalance

func TestDecodeAssignmentInfoHandWritten(t *testing.T) {
	b, err := hex.DecodeString(assignmentInfoV11Hex)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wire.DecodeAssignmentInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.AssignmentInfo{
		Version: 11, LatestSupportedVersion: 11,
		ActiveTasks:             []wire.TaskID{{Subtopology: 0, Partition: 1}},
		StandbyTasks:            []wire.StandbyTask{},
		PartitionsByHost:        []wire.HostPartitions{{wire.HostInfo{"h", 7}, []wire.TopicPartition{{"in", 1}}}},
		StandbyPartitionsByHost: []wire.HostPartitions{},
		NextRebalanceMs:         5,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestDecodeAssignmentInfoErrors(t *testing.T) {
	valid := wiretest.EncodeAssignmentInfo(sampleAssignmentInfo(11))
	badIndex, _ := hex.DecodeString(strings.Replace(assignmentInfoV11Hex, "0001"+"68"+"00000007"+"00000001"+"00000000", "0001"+"68"+"00000007"+"00000001"+"00000009", 1))
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "field version at byte 0: needs 4 bytes, 0 left"},
		{"version 0", []byte{0, 0, 0, 0}, "AssignmentInfo version 0, want 1..11"},
		{"version 12", append([]byte{0, 0, 0, 12}, valid[4:]...), "AssignmentInfo version 12, want 1..11"},
		{"truncated", valid[:len(valid)-3], "field nextRebalanceMs"},
		{"huge active count", []byte{0, 0, 0, 11, 0, 0, 0, 11, 0x7f, 0xff, 0xff, 0xff}, "field activeTasks at byte 8: count 2147483647 does not fit"},
		{"negative standby count", []byte{0, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe}, "field standbyTasks at byte 8: negative count -2"},
		{"topic index not in dictionary", badIndex, "field partitionsByHost[].partitions[].topicIndex at byte 55: index 9 is not in the topic dictionary"},
		{"bad modified UTF-8", []byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}, "field partitionsByHost[].host.host at byte 16: not modified UTF-8"},
	}
	for _, c := range cases {
		_, err := wire.DecodeAssignmentInfo(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want it to contain %q", c.name, err, c.want)
		}
	}
	_, err := wire.DecodeAssignmentInfo([]byte{0, 0, 0, 12})
	if !errors.Is(err, wire.ErrUnsupportedVersion) {
		t.Errorf("version 12: %v is not ErrUnsupportedVersion", err)
	}
}

func sampleSubscriptionInfo(version int32) *wire.SubscriptionInfo {
	s := &wire.SubscriptionInfo{
		Version:                version,
		LatestSupportedVersion: -1,
		ProcessID:              [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8},
	}
	if version >= 2 {
		s.UserEndpoint = "10.0.0.1:7070"
	}
	if version >= 3 {
		s.LatestSupportedVersion = wire.StreamsProtocolLatest
	}
	if version <= 6 {
		s.PrevTasks = []wire.TaskID{{Subtopology: 0, Partition: 1}}
		s.StandbyTasks = []wire.TaskID{{Subtopology: 0, Partition: 2}, {Subtopology: 1, Partition: 0}}
	} else {
		s.TaskOffsetSums = []wire.TaskOffsetSum{
			{wire.TaskID{Subtopology: 0, Partition: 1}, wire.LatestOffset},
			{wire.TaskID{Subtopology: 0, Partition: 2}, 1234},
			{wire.TaskID{Subtopology: 1, Partition: 0}, 99},
		}
	}
	if version >= 10 {
		s.TaskOffsetSums[2].Task.Topology = "named"
	}
	if version >= 8 {
		s.UniqueField = 7
	}
	if version >= 9 {
		s.ErrorCode = 0
	}
	if version >= 11 {
		s.ClientTags = []wire.ClientTag{{"az", "eu-west-1a"}, {"rack", "r1"}}
	}
	return s
}

func TestDecodeSubscriptionInfoAllVersions(t *testing.T) {
	for v := int32(1); v <= wire.StreamsProtocolLatest; v++ {
		want := sampleSubscriptionInfo(v)
		got, err := wire.DecodeSubscriptionInfo(wiretest.EncodeSubscriptionInfo(want))
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("version %d:\n got %+v\nwant %+v", v, got, want)
		}
	}
	s := sampleSubscriptionInfo(11)
	if got := s.ProcessIDString(); got != "12345678-9abc-def0-0102-030405060708" {
		t.Errorf("ProcessIDString = %s", got)
	}
	if v, ok := s.Tag("az"); !ok || v != "eu-west-1a" {
		t.Errorf("Tag(az) = %q, %v", v, ok)
	}
	if h, err := s.Endpoint(); err != nil || h != (wire.HostInfo{"10.0.0.1", 7070}) {
		t.Errorf("Endpoint = %v, %v", h, err)
	}
}

// subscriptionInfoV11Hex is a SubscriptionInfo v11 written by hand from
// SubscriptionInfoData: process ID 00..0f, endpoint "h:1", one offset sum
// (0_3 = 42, null named topology), unique field 1, error 0, tag az=b.
const subscriptionInfoV11Hex = "0000000b" + "0000000b" + "000102030405060708090a0b0c0d0e0f" +
	"00000003" + "683a31" + // userEndPoint "h:1"
	"00000001" + "00000000" + "00000003" + "000000000000002a" + "ffff" + // 0_3 -> 42
	"01" + "00000000" + // unique field, error code
	"00000001" + "00000002" + "617a" + "00000001" + "62" // az=b

func TestDecodeSubscriptionInfoHandWritten(t *testing.T) {
	b, _ := hex.DecodeString(subscriptionInfoV11Hex)
	got, err := wire.DecodeSubscriptionInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.SubscriptionInfo{
		Version: 11, LatestSupportedVersion: 11,
		ProcessID:      [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		UserEndpoint:   "h:1",
		TaskOffsetSums: []wire.TaskOffsetSum{{wire.TaskID{Subtopology: 0, Partition: 3}, 42}},
		UniqueField:    1,
		ClientTags:     []wire.ClientTag{{"az", "b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestDecodeSubscriptionInfoErrors(t *testing.T) {
	valid := wiretest.EncodeSubscriptionInfo(sampleSubscriptionInfo(11))
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"short", []byte{0, 0}, "field version at byte 0: needs 4 bytes, 2 left"},
		{"version 12", append([]byte{0, 0, 0, 12}, valid[4:]...), "SubscriptionInfo version 12, want 1..11"},
		{"no process id", []byte{0, 0, 0, 11, 0, 0, 0, 11, 1, 2}, "field processId at byte 8: needs 16 bytes, 2 left"},
		{"truncated tags", valid[:len(valid)-1], "field clientTags[].value"},
		{"huge endpoint", append(append([]byte{0, 0, 0, 2}, make([]byte, 24)...), 0x7f, 0, 0, 0), "field userEndPoint at byte 28: length 2130706432 but 0 bytes left"},
		{"endpoint not UTF-8", append(append([]byte{0, 0, 0, 2}, make([]byte, 24)...), 0, 0, 0, 1, 0xff), "field userEndPoint: not UTF-8"},
	}
	for _, c := range cases {
		_, err := wire.DecodeSubscriptionInfo(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want it to contain %q", c.name, err, c.want)
		}
	}
	for _, ep := range []string{"", "h", "h:0", "h:x", ":80", "h:65536"} {
		s := &wire.SubscriptionInfo{UserEndpoint: ep}
		if _, err := s.Endpoint(); err == nil || !strings.Contains(err.Error(), "field userEndPoint: "+wire.Quote(ep)) {
			t.Errorf("endpoint %q: got %v", ep, err)
		}
	}
}

func TestDecodeConsumerProtocol(t *testing.T) {
	for v := int16(0); v <= 4; v++ {
		want := &wire.ConsumerSubscription{Version: v, Topics: []string{"left", "right"}, UserData: []byte{1, 2, 3}, GenerationID: -1}
		if v >= 1 {
			want.OwnedPartitions = []wire.TopicPartition{{"left", 0}, {"left", 3}, {"right", 1}}
		}
		if v >= 2 {
			want.GenerationID = 17
		}
		if v >= 3 {
			want.RackID = "eu-west-1b"
		}
		b := wiretest.EncodeConsumerSubscription(want)
		if v == 4 {
			b = append(b, 0xde, 0xad) // a field of a future version
		}
		got, err := wire.DecodeConsumerSubscription(b)
		if err != nil {
			t.Fatalf("subscription v%d: %v", v, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("subscription v%d:\n got %+v\nwant %+v", v, got, want)
		}
		wa := &wire.ConsumerAssignment{Version: v, Partitions: []wire.TopicPartition{{"left", 1}, {"right", 2}, {"right", 6}}, UserData: []byte{9}}
		ga, err := wire.DecodeConsumerAssignment(wiretest.EncodeConsumerAssignment(wa))
		if err != nil || !reflect.DeepEqual(ga, wa) {
			t.Errorf("assignment v%d: got %+v, %v; want %+v", v, ga, err, wa)
		}
	}
	// A null user data and a null rack.
	s, err := wire.DecodeConsumerSubscription(wiretest.EncodeConsumerSubscription(&wire.ConsumerSubscription{Version: 3}))
	if err != nil || s.UserData != nil || s.RackID != "" {
		t.Errorf("nulls: %+v, %v", s, err)
	}
	for _, c := range []struct {
		in   []byte
		sub  bool
		want string
	}{
		{[]byte{0xff, 0xff}, true, "field subscription.version: -1 is negative"},
		{[]byte{0, 0, 0, 0, 0, 1, 0, 5, 'a'}, true, "field subscription.topics[] at byte 6: length 5 but 1 bytes left"},
		{[]byte{0, 3, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0xc3}, true, "field subscription.rackId at byte 18: length 2 but 1 bytes left"},
		{[]byte{0, 0, 0, 0, 0, 1, 0, 1, 'a', 0xff, 0xff, 0xff, 0xff}, false, "field assignment.assignedPartitions.partitions at byte 9: negative count -1"},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, false, "field assignment.userData at byte 6: length 9 but 0 bytes left"},
	} {
		var err error
		if c.sub {
			_, err = wire.DecodeConsumerSubscription(c.in)
		} else {
			_, err = wire.DecodeConsumerAssignment(c.in)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("% x: got %v, want %q", c.in, err, c.want)
		}
	}
}

func FuzzDecodeAssignmentInfo(f *testing.F) {
	for v := int32(1); v <= wire.StreamsProtocolLatest; v++ {
		f.Add(wiretest.EncodeAssignmentInfo(sampleAssignmentInfo(v)))
	}
	b, _ := hex.DecodeString(assignmentInfoV11Hex)
	f.Add(b)
	_, asg := wiretest.CapturedMember(f)
	if a, err := wire.DecodeConsumerAssignment(asg); err == nil {
		f.Add(a.UserData)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := wire.DecodeAssignmentInfo(b)
		if err != nil {
			if a != nil {
				t.Fatal("value and error")
			}
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		again, err := wire.DecodeAssignmentInfo(wiretest.EncodeAssignmentInfo(a))
		if err != nil {
			t.Fatalf("re-encoded: %v", err)
		}
		if !reflect.DeepEqual(normAI(again), normAI(a)) {
			t.Fatalf("round trip:\n%+v\n%+v", a, again)
		}
	})
}

func FuzzDecodeSubscriptionInfo(f *testing.F) {
	for v := int32(1); v <= wire.StreamsProtocolLatest; v++ {
		f.Add(wiretest.EncodeSubscriptionInfo(sampleSubscriptionInfo(v)))
	}
	b, _ := hex.DecodeString(subscriptionInfoV11Hex)
	f.Add(b)
	meta, _ := wiretest.CapturedMember(f)
	if s, err := wire.DecodeConsumerSubscription(meta); err == nil {
		f.Add(s.UserData)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := wire.DecodeSubscriptionInfo(b)
		if err != nil {
			if s != nil {
				t.Fatal("value and error")
			}
			return
		}
		_, _ = s.Endpoint()
		if len(s.UserEndpoint) > len(b) {
			t.Fatalf("endpoint longer than the input")
		}
	})
}

func FuzzDecodeConsumerProtocol(f *testing.F) {
	f.Add(wiretest.EncodeConsumerSubscription(&wire.ConsumerSubscription{Version: 3, Topics: []string{"a"}, UserData: []byte{1}, RackID: "r"}))
	f.Add(wiretest.EncodeConsumerAssignment(&wire.ConsumerAssignment{Version: 0, Partitions: []wire.TopicPartition{{"a", 1}}, UserData: []byte{1}}))
	meta, asg := wiretest.CapturedMember(f)
	f.Add(meta)
	f.Add(asg)
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := wire.DecodeConsumerSubscription(b); err == nil && len(s.UserData) > len(b) {
			t.Fatal("user data longer than the input")
		}
		if a, err := wire.DecodeConsumerAssignment(b); err == nil && len(a.UserData) > len(b) {
			t.Fatal("user data longer than the input")
		}
	})
}
