package iq

import (
	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// Errors of a poll of a source made by NewClusterSource (Refresh,
// LastPoll); test with errors.Is. Each is wrapped in an error that names
// the group and, where it applies, the member and field.
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

// groupInfo converts what the group reader read to what the azkafka
// command shows (iq describe).
func groupInfo(in group.Info) *iqinspect.Group {
	out := &iqinspect.Group{ApplicationID: in.ApplicationID, Protocol: in.Protocol, State: in.State,
		StoreSubtopology: in.StoreSubtopology, Members: make([]iqinspect.Member, len(in.Members))}
	for i, m := range in.Members {
		gm := iqinspect.Member{MemberID: m.MemberID, ClientID: m.ClientID, ProcessID: m.ProcessID,
			RackID: m.RackID, AZ: m.AZ}
		if m.Endpoint.Port > 0 {
			gm.Endpoint = HostInfo(m.Endpoint).String()
		}
		for _, t := range m.ClientTags {
			gm.ClientTags = append(gm.ClientTags, t.Key+"="+t.Value)
		}
		out.Members[i] = gm
	}
	return out
}

// groupMetadata converts the routing the group reader read to Metadata.
// newSnapshot copies the result, so maps are shared, not copied.
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
