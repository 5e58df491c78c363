package group

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// Streams reads a group on the streams rebalance protocol (KIP-1071)
// described by StreamsGroupDescribe. Each member is one instance; its
// current assignment names tasks as (subtopology, partitions), and the
// topology names each subtopology's source, repartition-source and
// changelog topics. A task's partitions are those of its subtopology's
// source topics that exist: partition p of a topic with fewer than p+1
// partitions is not part of task p. (Kafka Streams 4.3.1's own metadata
// lists such partitions, KAFKA-20885.) Warm-up tasks are not queryable
// copies and are left out, as Kafka Streams leaves them out. Lags are not
// known on this protocol.
func Streams(g *kmsg.StreamsGroupDescribeResponseGroup, cfg Config) (*View, error) {
	group := wire.Quote(cfg.AppID)
	switch {
	case g.ErrorCode == kerr.GroupIDNotFound.Code:
		return nil, fmt.Errorf("iq: group %s: GROUP_ID_NOT_FOUND: is the application.id right and the application running? (%w)", group, ErrGroupNotFound)
	case g.ErrorCode != 0:
		msg := ""
		if g.ErrorMessage != nil {
			msg = *g.ErrorMessage
		}
		return nil, fmt.Errorf("iq: group %s: StreamsGroupDescribe: %s: %s", group, kframe.ErrorName(g.ErrorCode), msg)
	case len(g.Members) == 0:
		return nil, fmt.Errorf("iq: group %s: state %s with 0 members: is the application running? (%w)", group, wire.Quote(g.State), ErrGroupNotFound)
	case g.Topology == nil || len(g.Topology.Subtopologies) == 0:
		return nil, fmt.Errorf("iq: group %s: state %s: no topology yet; keeping the last good routing (%w)", group, wire.Quote(g.State), ErrRebalancing)
	}
	v := &View{
		Info: Info{ApplicationID: cfg.AppID, Protocol: "streams", State: g.State,
			StoreSubtopology: map[string]string{}},
		subtopologies: map[string][]string{},
		taskCount:     map[string]int{},
		offsetSums:    map[wire.HostInfo]map[wire.TaskID]int64{},
		changelogs:    map[string]string{},
	}
	counts := maps.Clone(cfg.Topics)
	topicSub := map[string]string{}
	storeSub := map[string]string{}
	for _, st := range g.Topology.Subtopologies {
		topics := slices.Clone(st.SourceTopics)
		for _, t := range st.RepartitionSourceTopics {
			topics = append(topics, t.Topic)
			if _, ok := counts[t.Topic]; !ok && t.NumPartitions > 0 {
				counts[t.Topic] = int(t.NumPartitions)
			}
		}
		sort.Strings(topics)
		v.subtopologies[st.SubtopologyID] = topics
		for _, t := range topics {
			topicSub[t] = st.SubtopologyID
			v.taskCount[st.SubtopologyID] = max(v.taskCount[st.SubtopologyID], counts[t])
		}
		for _, c := range st.StateChangelogTopics {
			if store, ok := storeOfChangelog(cfg.AppID, c.Topic); ok {
				v.changelogs[store] = c.Topic
				storeSub[store] = st.SubtopologyID
			}
		}
	}
	v.Routing = Routing{StoreSourceTopics: map[string][]string{}, TopicPartitions: map[string]int{}, UnmappedStores: map[string]string{}}
	for store, sub := range storeSub {
		if _, ok := cfg.StoreTopics[store]; ok {
			continue
		}
		topics := v.subtopologies[sub]
		if uneven(topics, counts) {
			v.Routing.UnmappedStores[store] = fmt.Sprintf("subtopology %s reads topics of different partition counts (%s), and the group does not say which feed the store; name them with iq.WithStoreTopics(%q, topics...) or use the HTTP source", sub, describeCounts(topics, counts), store)
			continue
		}
		v.Routing.StoreSourceTopics[store] = slices.Clone(topics)
		v.Info.StoreSubtopology[store] = sub
	}
	for store, topics := range cfg.StoreTopics {
		var missing []string
		for _, t := range topics {
			if _, ok := counts[t]; !ok {
				missing = append(missing, wire.Quote(t))
			}
		}
		if len(missing) > 0 {
			v.Routing.UnmappedStores[store] = fmt.Sprintf("WithStoreTopics names topics the cluster does not have: %v", missing)
			continue
		}
		v.Routing.StoreSourceTopics[store] = slices.Clone(topics)
		if sub, ok := topicSub[topics[0]]; ok {
			v.Info.StoreSubtopology[store] = sub
		}
	}
	for _, topics := range v.Routing.StoreSourceTopics {
		for _, t := range topics {
			v.Routing.TopicPartitions[t] = counts[t]
		}
	}

	members := slices.Clone(g.Members)
	slices.SortFunc(members, func(a, b kmsg.StreamsGroupDescribeResponseGroupMember) int {
		return cmp.Compare(a.MemberID, b.MemberID)
	})
	byHost := map[wire.HostInfo]*Instance{}
	var order []wire.HostInfo
	for _, m := range members {
		gm := Member{MemberID: m.MemberID, ClientID: m.ClientID, ProcessID: m.ProcessID}
		if m.RackID != nil {
			gm.RackID = *m.RackID
		}
		if m.UserEndpoint != nil {
			gm.Endpoint = wire.HostInfo{Host: m.UserEndpoint.Host, Port: int(m.UserEndpoint.Port)}
		}
		for _, t := range m.ClientTags {
			gm.ClientTags = append(gm.ClientTags, wire.ClientTag{Key: t.Key, Value: t.Value})
		}
		gm.AZ = gm.RackID
		if gm.AZ == "" {
			for _, t := range gm.ClientTags {
				if t.Key == cfg.AZTag {
					gm.AZ = t.Value
				}
			}
		}
		v.Info.Members = append(v.Info.Members, gm)
		if gm.Endpoint.Host == "" {
			continue
		}
		if gm.Endpoint.Port <= 0 {
			return nil, fmt.Errorf("iq: group %s member %s: field userEndpoint.port: %d out of range 1..65535", group, wire.Quote(m.MemberID), gm.Endpoint.Port)
		}
		in := byHost[gm.Endpoint]
		if in == nil {
			in = &Instance{HostInfo: gm.Endpoint, AZ: gm.AZ}
			byHost[gm.Endpoint] = in
			order = append(order, gm.Endpoint)
		}
		for _, set := range []struct {
			field string
			tasks []kmsg.TaskIDs
			dst   *[]wire.TopicPartition
		}{{"assignment.activeTasks", m.Assignment.ActiveTasks, &in.ActivePartitions}, {"assignment.standbyTasks", m.Assignment.StandbyTasks, &in.StandbyPartitions}} {
			for _, ts := range set.tasks {
				topics, ok := v.subtopologies[ts.SubtopologyID]
				if !ok {
					return nil, fmt.Errorf("iq: group %s member %s: field %s: subtopology %s is not in the topology", group, wire.Quote(m.MemberID), set.field, wire.Quote(ts.SubtopologyID))
				}
				for _, p := range ts.Partitions {
					for _, t := range topics {
						if int(p) < counts[t] && p >= 0 {
							*set.dst = append(*set.dst, wire.TopicPartition{Topic: t, Partition: int(p)})
						}
					}
				}
			}
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("iq: group %s: no member sets application.server: interactive queries need it on every instance", group)
	}
	for _, h := range order {
		in := byHost[h]
		slices.SortFunc(in.ActivePartitions, compareTP)
		slices.SortFunc(in.StandbyPartitions, compareTP)
		in.ActiveStores = storesOn(v.Routing.StoreSourceTopics, in.ActivePartitions)
		in.StandbyStores = storesOn(v.Routing.StoreSourceTopics, in.StandbyPartitions)
		v.Routing.Instances = append(v.Routing.Instances, *in)
	}
	return v, nil
}
