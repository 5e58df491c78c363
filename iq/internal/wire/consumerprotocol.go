package wire

import "fmt"

// ConsumerSubscription is a member's metadata in a classic consumer group
// (the consumer protocol's Subscription, versions 0 to 3), as
// DescribeGroups returns it while the group is Stable.
type ConsumerSubscription struct {
	Version int16
	Topics  []string
	// UserData is the assignor's data; for Kafka Streams its SubscriptionInfo.
	UserData        []byte
	OwnedPartitions []TopicPartition // version 1 and later
	GenerationID    int32            // version 2 and later; -1 before
	// RackID is the member's client.rack (version 3 and later); empty when
	// not set.
	RackID string
}

// ConsumerAssignment is a member's assignment in a classic consumer group
// (the consumer protocol's Assignment).
type ConsumerAssignment struct {
	Version    int16
	Partitions []TopicPartition
	// UserData is the assignor's data; for Kafka Streams its AssignmentInfo.
	UserData []byte
}

// DecodeConsumerSubscription decodes a consumer-protocol Subscription.
// Like the Java consumer it reads a version above 3 as version 3 (the
// protocol only appends fields) and ignores trailing bytes. Errors name the
// field and its byte offset.
func DecodeConsumerSubscription(b []byte) (*ConsumerSubscription, error) {
	r := &wireReader{b: b}
	s := &ConsumerSubscription{GenerationID: -1}
	s.Version = r.int16("subscription.version")
	if r.err == nil && s.Version < 0 {
		return nil, fmt.Errorf("field subscription.version: %d is negative", s.Version)
	}
	n := r.count("subscription.topics", 2, false)
	for range n {
		t, _ := r.string16("subscription.topics[]", false)
		s.Topics = append(s.Topics, t)
	}
	s.UserData, _ = r.bytes32("subscription.userData", true)
	if s.Version >= 1 {
		s.OwnedPartitions = readTopicPartitionArray(r, "subscription.ownedPartitions")
	}
	if s.Version >= 2 {
		s.GenerationID = r.int32("subscription.generationId")
	}
	if s.Version >= 3 {
		s.RackID, _ = r.string16("subscription.rackId", true)
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// DecodeConsumerAssignment decodes a consumer-protocol Assignment. Errors
// name the field and its byte offset.
func DecodeConsumerAssignment(b []byte) (*ConsumerAssignment, error) {
	r := &wireReader{b: b}
	a := &ConsumerAssignment{}
	a.Version = r.int16("assignment.version")
	if r.err == nil && a.Version < 0 {
		return nil, fmt.Errorf("field assignment.version: %d is negative", a.Version)
	}
	a.Partitions = readTopicPartitionArray(r, "assignment.assignedPartitions")
	a.UserData, _ = r.bytes32("assignment.userData", true)
	if r.err != nil {
		return nil, r.err
	}
	return a, nil
}

// readTopicPartitionArray reads [topic STRING, partitions [INT32]].
func readTopicPartitionArray(r *wireReader, field string) []TopicPartition {
	var out []TopicPartition
	n := r.count(field, 6, false)
	for range n {
		t, _ := r.string16(field+".topic", false)
		m := r.count(field+".partitions", 4, false)
		for range m {
			out = append(out, TopicPartition{t, int(r.int32(field + ".partitions[]"))})
		}
	}
	return out
}
