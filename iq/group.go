package iq

import (
	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// Errors of a ClusterSource poll; test with errors.Is. Each is wrapped in
// an error that names the group and, where it applies, the member and
// field.
var (
	// ErrGroupNotFound: the group does not exist, is empty, or is not a
	// group of the protocol asked.
	ErrGroupNotFound = group.ErrGroupNotFound
	// ErrNotStreamsGroup: the group exists but is not a Kafka Streams
	// application's group.
	ErrNotStreamsGroup = group.ErrNotStreamsGroup
	// ErrRebalancing: the group is rebalancing; its member metadata is
	// not available until it is Stable again.
	ErrRebalancing = group.ErrRebalancing
	// ErrUnsupportedVersion: a member's SubscriptionInfo or AssignmentInfo
	// is of a version this package does not read: newer than Kafka
	// Streams 4.3's (11), or AssignmentInfo version 1, which has no
	// routing.
	ErrUnsupportedVersion = wire.ErrUnsupportedVersion
)

// GroupMember is one member of a Kafka Streams group (one stream thread in
// the classic protocol, one instance in the streams protocol).
type GroupMember struct {
	MemberID  string
	ClientID  string
	ProcessID string
	// Endpoint is the instance's application.server; zero when not set.
	Endpoint HostInfo
	// RackID is the member's client.rack; empty when not set.
	RackID string
	// AZ is the zone the source gives the instance: RackID, else the
	// client tag named by WithAZTag; empty when unknown.
	AZ string
	// ClientTags are the instance's client.tag.* settings.
	ClientTags []ClientTag
}

// ClientTag is one client.tag.<key>=<value> setting of a Streams instance.
type ClientTag struct{ Key, Value string }

// GroupInfo is what a cluster source read from the group on its last good
// poll, besides the routing metadata.
type GroupInfo struct {
	ApplicationID string
	// Protocol is "classic" or "streams".
	Protocol string
	// State is the group state the broker reports, e.g. "Stable".
	State   string
	Members []GroupMember
	// StoreSubtopology maps each store mapped from the group to its
	// subtopology; stores given by WithStoreTopics are included when their
	// topics belong to one subtopology.
	StoreSubtopology map[string]string
}

// groupInfo converts what the group reader read to the exported form.
func groupInfo(in group.Info) GroupInfo {
	out := GroupInfo{ApplicationID: in.ApplicationID, Protocol: in.Protocol, State: in.State,
		StoreSubtopology: in.StoreSubtopology, Members: make([]GroupMember, len(in.Members))}
	for i, m := range in.Members {
		gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, ProcessID: m.ProcessID,
			Endpoint: HostInfo(m.Endpoint), RackID: m.RackID, AZ: m.AZ}
		for _, t := range m.ClientTags {
			gm.ClientTags = append(gm.ClientTags, ClientTag(t))
		}
		out.Members[i] = gm
	}
	return out
}

// groupMetadata converts the routing the group reader read to Metadata.
// NewSnapshot copies the result, so maps are shared, not copied.
func groupMetadata(r group.Routing) Metadata {
	md := Metadata{StoreSourceTopics: r.StoreSourceTopics, TopicPartitions: r.TopicPartitions,
		UnmappedStores: r.UnmappedStores, Instances: make([]Instance, len(r.Instances))}
	for i, in := range r.Instances {
		out := Instance{HostInfo: HostInfo(in.HostInfo), AZ: in.AZ,
			ActiveStores: in.ActiveStores, StandbyStores: in.StandbyStores,
			ActivePartitions: fromWire(in.ActivePartitions), StandbyPartitions: fromWire(in.StandbyPartitions)}
		if in.Lags != nil {
			out.Lags = make(map[string]map[int]Lag, len(in.Lags))
			for store, m := range in.Lags {
				lm := make(map[int]Lag, len(m))
				for p, l := range m {
					lm[p] = Lag(l)
				}
				out.Lags[store] = lm
			}
		}
		md.Instances[i] = out
	}
	return md
}

func fromWire(tps []wire.TopicPartition) []TopicPartition {
	if tps == nil {
		return nil
	}
	out := make([]TopicPartition, len(tps))
	for i, tp := range tps {
		out[i] = TopicPartition(tp)
	}
	return out
}
