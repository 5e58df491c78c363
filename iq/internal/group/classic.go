package group

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go/protocol/describegroups"

	"github.com/azkafka/azkafka/iq/internal/wire"
)

// Errors of a group that cannot be read; package iq exports them.
var (
	// ErrGroupNotFound: the group does not exist, is empty, or is not a
	// group of the protocol asked.
	ErrGroupNotFound = errors.New("iq: consumer group not found or empty")
	// ErrNotStreamsGroup: the group exists but is not a Kafka Streams
	// application's group.
	ErrNotStreamsGroup = errors.New("iq: not a Kafka Streams group")
	// ErrRebalancing: the group is rebalancing; its member metadata is
	// not available until it is Stable again.
	ErrRebalancing = errors.New("iq: group is rebalancing")
)

// streamsAssignor is the name of Kafka Streams' partition assignor, the
// protocol of a Streams application's classic group.
const streamsAssignor = "stream"

// Member is one member of a Kafka Streams group (one stream thread in the
// classic protocol, one instance in the streams protocol): iq.GroupMember.
type Member struct {
	MemberID  string
	ClientID  string
	ProcessID string
	// Endpoint is the instance's application.server; zero when not set.
	Endpoint wire.HostInfo
	// RackID is the member's client.rack; empty when not set.
	RackID string
	// AZ is RackID, else the client tag Config.AZTag; empty when unknown.
	AZ string
	// ClientTags are the instance's client.tag.* settings.
	ClientTags []wire.ClientTag
}

// Info is what a poll read from the group besides the routing:
// iq.GroupInfo.
type Info struct {
	ApplicationID string
	// Protocol is "classic" or "streams".
	Protocol string
	// State is the group state the broker reports, e.g. "Stable".
	State   string
	Members []Member
	// StoreSubtopology maps each store mapped from the group to its
	// subtopology; stores given by Config.StoreTopics are included when
	// their topics belong to one subtopology.
	StoreSubtopology map[string]string
}

// Routing is the routing read from a group, in the shape of iq.Metadata.
type Routing struct {
	// StoreSourceTopics maps each store to its source topics.
	StoreSourceTopics map[string][]string
	// TopicPartitions maps each of those topics to its partition count.
	TopicPartitions map[string]int
	// Instances lists the instances that set application.server.
	Instances []Instance
	// UnmappedStores names the stores whose source topics the group does
	// not tell, with the reason and the way out.
	UnmappedStores map[string]string
}

// Instance is one Kafka Streams instance: iq.Instance.
type Instance struct {
	wire.HostInfo
	// AZ is the zone of the instance's members; empty when unknown.
	AZ                                  string
	ActiveStores, StandbyStores         []string
	ActivePartitions, StandbyPartitions []wire.TopicPartition
	// Lags are the standby lag bounds ApplyLagBounds sets, by store, then
	// partition; nil until then.
	Lags map[string]map[int]Lag
}

// Lag is a standby's lag bound (Bound is always true): iq.Lag.
type Lag struct {
	Current, End, Lag int64
	Bound             bool
}

// View is one poll's reading of a group, before end offsets are known.
type View struct {
	Info    Info
	Routing Routing
	// subtopologies maps a subtopology to its source topics.
	subtopologies map[string][]string
	// taskCount is a subtopology's number of tasks (its widest source topic).
	taskCount map[string]int
	// offsetSums maps an instance, then a task, to the lowest offset sum its
	// members reported when they joined.
	offsetSums map[wire.HostInfo]map[wire.TaskID]int64
	// changelogs maps each store with a changelog topic to that topic.
	changelogs map[string]string
}

// Config is what turning a group into routing needs besides the group.
type Config struct {
	// AppID is the application.id, the group's name.
	AppID string
	// Topics maps every topic of the cluster to its partition count.
	Topics map[string]int
	// StoreTopics are the source topics given per store (iq.WithStoreTopics).
	StoreTopics map[string][]string
	// AZTag is the client tag that gives an instance's zone when it sets no
	// client.rack.
	AZTag string
}

// Classic reads a classic group described by DescribeGroups: each
// member's subscription and assignment, whose Kafka Streams user data
// (SubscriptionInfo, AssignmentInfo) carry the whole application's routing.
// It fails, with an error naming the group, the member and the field, on
// anything it cannot read.
func Classic(g *describegroups.ResponseGroup, cfg Config) (*View, error) {
	group := wire.Quote(cfg.AppID)
	if g.ErrorCode != 0 {
		return nil, fmt.Errorf("iq: group %s: DescribeGroups error code %d", group, g.ErrorCode)
	}
	if g.GroupState == "Dead" || len(g.Members) == 0 {
		return nil, fmt.Errorf("iq: group %s: state %s with %d members: is the application.id right and the application running? (%w)", group, wire.Quote(g.GroupState), len(g.Members), ErrGroupNotFound)
	}
	if g.ProtocolType != "consumer" {
		return nil, fmt.Errorf("iq: group %s: protocol type %s, want \"consumer\": %w", group, wire.Quote(g.ProtocolType), ErrNotStreamsGroup)
	}
	if g.GroupState != "Stable" {
		return nil, fmt.Errorf("iq: group %s: state %s: member metadata is known only when Stable; keeping the last good routing (%w)", group, wire.Quote(g.GroupState), ErrRebalancing)
	}
	if g.ProtocolData != streamsAssignor {
		return nil, fmt.Errorf("iq: group %s: assignor %s, want %q (Kafka Streams): %w", group, wire.Quote(g.ProtocolData), streamsAssignor, ErrNotStreamsGroup)
	}
	members := slices.Clone(g.Members)
	slices.SortFunc(members, func(a, b describegroups.ResponseGroupMember) int { return cmp.Compare(a.MemberID, b.MemberID) })

	v := &View{
		Info: Info{ApplicationID: cfg.AppID, Protocol: "classic", State: g.GroupState,
			StoreSubtopology: map[string]string{}},
		subtopologies: map[string][]string{},
		taskCount:     map[string]int{},
		offsetSums:    map[wire.HostInfo]map[wire.TaskID]int64{},
	}
	topicSub := map[string]string{}
	// stateful collects the subtopologies known to hold state: those with
	// standby tasks or with offset sums in a subscription.
	stateful := map[string]bool{}
	addTopic := func(m, field, topic string, sub int32) error {
		s := subtopologyName(sub)
		if old, ok := topicSub[topic]; ok && old != s {
			return fmt.Errorf("iq: group %s member %s: field %s: topic %s in subtopologies %s and %s", group, wire.Quote(m), field, wire.Quote(topic), old, s)
		}
		if _, ok := topicSub[topic]; !ok {
			topicSub[topic] = s
			v.subtopologies[s] = append(v.subtopologies[s], topic)
		}
		return nil
	}
	var routing *wire.AssignmentInfo
	for _, m := range members {
		mid := wire.Quote(m.MemberID)
		sub, err := wire.DecodeConsumerSubscription(m.MemberMetadata)
		if err != nil {
			return nil, fmt.Errorf("iq: group %s member %s: member metadata: %w", group, mid, err)
		}
		si, err := wire.DecodeSubscriptionInfo(sub.UserData)
		if err != nil {
			return nil, fmt.Errorf("iq: group %s member %s: SubscriptionInfo: %w", group, mid, err)
		}
		asg, err := wire.DecodeConsumerAssignment(m.MemberAssignment)
		if err != nil {
			return nil, fmt.Errorf("iq: group %s member %s: member assignment: %w", group, mid, err)
		}
		ai, err := wire.DecodeAssignmentInfo(asg.UserData)
		if err != nil {
			return nil, fmt.Errorf("iq: group %s member %s: AssignmentInfo: %w", group, mid, err)
		}
		if ai.ErrorCode != 0 {
			return nil, fmt.Errorf("iq: group %s member %s: AssignmentInfo field errorCode: %d: the assignor failed (Kafka Streams shuts down on it)", group, mid, ai.ErrorCode)
		}
		if ai.Version < 2 {
			return nil, fmt.Errorf("iq: group %s member %s: AssignmentInfo version %d has no partitionsByHost: %w", group, mid, ai.Version, wire.ErrUnsupportedVersion)
		}
		if routing == nil || ai.Version > routing.Version {
			routing = ai
		}
		// Kafka Streams pairs the i-th assigned partition, in topic then
		// partition order, with the i-th active task.
		parts := slices.Clone(asg.Partitions)
		slices.SortFunc(parts, compareTP)
		if len(parts) != len(ai.ActiveTasks) {
			return nil, fmt.Errorf("iq: group %s member %s: AssignmentInfo field activeTasks: %d tasks for %d assigned partitions", group, mid, len(ai.ActiveTasks), len(parts))
		}
		for i, tp := range parts {
			if err := addTopic(m.MemberID, "activeTasks", tp.Topic, ai.ActiveTasks[i].Subtopology); err != nil {
				return nil, err
			}
		}
		for _, st := range ai.StandbyTasks {
			stateful[subtopologyName(st.Task.Subtopology)] = true // standbys exist for stateful tasks only
			for _, tp := range st.Partitions {
				if err := addTopic(m.MemberID, "standbyTasks", tp.Topic, st.Task.Subtopology); err != nil {
					return nil, err
				}
			}
		}
		gm := Member{MemberID: m.MemberID, ClientID: m.ClientID, ProcessID: si.ProcessIDString(),
			RackID: sub.RackID}
		for _, t := range si.ClientTags {
			gm.ClientTags = append(gm.ClientTags, wire.ClientTag(t))
		}
		if si.UserEndpoint != "" {
			h, err := si.Endpoint()
			if err != nil {
				return nil, fmt.Errorf("iq: group %s member %s: SubscriptionInfo %w", group, mid, err)
			}
			gm.Endpoint = h
			sums := v.offsetSums[gm.Endpoint]
			if sums == nil {
				sums = map[wire.TaskID]int64{}
				v.offsetSums[gm.Endpoint] = sums
			}
			for _, ts := range si.TaskOffsetSums {
				if old, ok := sums[ts.Task]; !ok || ts.OffsetSum < old {
					sums[ts.Task] = ts.OffsetSum
				}
			}
		}
		gm.AZ = gm.RackID
		if gm.AZ == "" {
			gm.AZ, _ = si.Tag(cfg.AZTag)
		}
		v.Info.Members = append(v.Info.Members, gm)
	}
	if len(routing.PartitionsByHost) == 0 && len(routing.StandbyPartitionsByHost) == 0 {
		return nil, fmt.Errorf("iq: group %s: no member sets application.server: interactive queries need it on every instance", group)
	}
	for s, topics := range v.subtopologies {
		sort.Strings(topics)
		for _, t := range topics {
			v.taskCount[s] = max(v.taskCount[s], cfg.Topics[t])
		}
	}
	for _, sums := range v.offsetSums {
		for t := range sums {
			stateful[subtopologyName(t.Subtopology)] = true
		}
	}
	v.Routing = Routing{StoreSourceTopics: map[string][]string{}, TopicPartitions: map[string]int{}, UnmappedStores: map[string]string{}}
	v.mapStores(cfg, topicSub, stateful)
	v.addInstances(routing)
	return v, nil
}

func compareTP(a, b wire.TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

func subtopologyName(s int32) string { return strconv.Itoa(int(s)) }

// changelogStores returns the stores that have a changelog topic among
// topics, mapped to it.
func changelogStores(appID string, topics map[string]int) map[string]string {
	out := map[string]string{}
	for t := range topics {
		if store, ok := storeOfChangelog(appID, t); ok {
			out[store] = t
		}
	}
	return out
}

// storeOfChangelog returns the store whose changelog topic is topic, as
// Kafka Streams names it: <application.id>-<store>-changelog.
func storeOfChangelog(appID, topic string) (string, bool) {
	prefix, suffix := appID+"-", "-changelog"
	if strings.HasPrefix(topic, prefix) && strings.HasSuffix(topic, suffix) && len(topic) > len(prefix)+len(suffix) {
		return topic[len(prefix) : len(topic)-len(suffix)], true
	}
	return "", false
}

// mapStores finds each store's source topics. A store's changelog has one
// partition per task of the store's subtopology, so the subtopology is the
// one whose task count equals the changelog's partition count, if only one
// has it (among those known to hold state, when that settles it). Its
// source topics feed the store only if they all have the same partition
// count: then any subset routes a key to the same partition and the same
// instances. Otherwise the group cannot tell which of them feed the store
// (Kafka Streams routes on those upstream of the store's processors), and
// the store is left unmapped with the way out in its reason.
func (v *View) mapStores(cfg Config, topicSub map[string]string, stateful map[string]bool) {
	v.changelogs = changelogStores(cfg.AppID, cfg.Topics)
	subs := make([]string, 0, len(v.subtopologies))
	for s := range v.subtopologies {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	for store, changelog := range v.changelogs {
		if _, ok := cfg.StoreTopics[store]; ok {
			continue
		}
		n := cfg.Topics[changelog]
		var cands, statefulCands []string
		for _, s := range subs {
			if v.taskCount[s] == n {
				cands = append(cands, s)
				if stateful[s] {
					statefulCands = append(statefulCands, s)
				}
			}
		}
		if len(cands) > 1 && len(statefulCands) == 1 {
			cands = statefulCands
		}
		way := fmt.Sprintf("name them with iq.WithStoreTopics(%q, topics...) or use the HTTP source", store)
		switch {
		case len(cands) == 0:
			v.Routing.UnmappedStores[store] = fmt.Sprintf("no subtopology has %d tasks like changelog %s; %s", n, wire.Quote(changelog), way)
			continue
		case len(cands) > 1:
			v.Routing.UnmappedStores[store] = fmt.Sprintf("subtopologies %s all have %d tasks like changelog %s; %s", strings.Join(cands, ", "), n, wire.Quote(changelog), way)
			continue
		}
		topics := v.subtopologies[cands[0]]
		if uneven(topics, cfg.Topics) {
			v.Routing.UnmappedStores[store] = fmt.Sprintf("subtopology %s reads topics of different partition counts (%s), and the group does not say which feed the store; %s", cands[0], describeCounts(topics, cfg.Topics), way)
			continue
		}
		v.Routing.StoreSourceTopics[store] = slices.Clone(topics)
		v.Info.StoreSubtopology[store] = cands[0]
	}
	for store, topics := range cfg.StoreTopics {
		var missing []string
		sub := ""
		for i, t := range topics {
			if _, ok := cfg.Topics[t]; !ok {
				missing = append(missing, wire.Quote(t))
			}
			if i == 0 {
				sub = topicSub[t]
			} else if topicSub[t] != sub {
				sub = ""
			}
		}
		if len(missing) > 0 {
			v.Routing.UnmappedStores[store] = fmt.Sprintf("WithStoreTopics names topics the cluster does not have: %s", strings.Join(missing, ", "))
			continue
		}
		v.Routing.StoreSourceTopics[store] = slices.Clone(topics)
		if sub != "" {
			v.Info.StoreSubtopology[store] = sub
		}
	}
	for _, topics := range v.Routing.StoreSourceTopics {
		for _, t := range topics {
			v.Routing.TopicPartitions[t] = cfg.Topics[t]
		}
	}
}

func uneven(topics []string, counts map[string]int) bool {
	for _, t := range topics {
		if counts[t] != counts[topics[0]] {
			return true
		}
	}
	return false
}

func describeCounts(topics []string, counts map[string]int) string {
	parts := make([]string, len(topics))
	for i, t := range topics {
		parts[i] = fmt.Sprintf("%s: %d", t, counts[t])
	}
	return strings.Join(parts, ", ")
}

// addInstances fills the instances from one member's AssignmentInfo, as
// StreamsMetadataState does from partitionsByHost and
// standbyPartitionsByHost: an instance hosts a store when one of the
// store's source topics is among its partitions.
func (v *View) addInstances(ai *wire.AssignmentInfo) {
	byHost := map[wire.HostInfo]*Instance{}
	var order []wire.HostInfo
	get := func(h wire.HostInfo) *Instance {
		if in := byHost[h]; in != nil {
			return in
		}
		in := &Instance{HostInfo: h}
		for _, m := range v.Info.Members {
			if m.Endpoint == h && m.AZ != "" {
				in.AZ = m.AZ
				break
			}
		}
		byHost[h] = in
		order = append(order, h)
		return in
	}
	for _, hp := range ai.PartitionsByHost {
		in := get(hp.Host)
		in.ActivePartitions = append(in.ActivePartitions, hp.Partitions...)
	}
	for _, hp := range ai.StandbyPartitionsByHost {
		in := get(hp.Host)
		in.StandbyPartitions = append(in.StandbyPartitions, hp.Partitions...)
	}
	for _, h := range order {
		in := byHost[h]
		slices.SortFunc(in.ActivePartitions, compareTP)
		slices.SortFunc(in.StandbyPartitions, compareTP)
		in.ActiveStores = storesOn(v.Routing.StoreSourceTopics, in.ActivePartitions)
		in.StandbyStores = storesOn(v.Routing.StoreSourceTopics, in.StandbyPartitions)
		v.Routing.Instances = append(v.Routing.Instances, *in)
	}
}

func storesOn(storeTopics map[string][]string, tps []wire.TopicPartition) []string {
	var out []string
	for store, topics := range storeTopics {
		for _, tp := range tps {
			if slices.Contains(topics, tp.Topic) {
				out = append(out, store)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// lagTargets returns the changelog partitions whose end offsets bound the
// lag of the standbys: for each standby partition of a store whose
// subtopology is known, every changelog of that task count at that
// partition.
func (v *View) LagTargets(topics map[string]int) []wire.TopicPartition {
	seen := map[wire.TopicPartition]bool{}
	var out []wire.TopicPartition
	for _, in := range v.Routing.Instances {
		for _, store := range in.StandbyStores {
			sub, ok := v.Info.StoreSubtopology[store]
			if !ok {
				continue
			}
			for _, tp := range v.taskChangelogs(sub, topics) {
				for _, sp := range in.StandbyPartitions {
					if slices.Contains(v.Routing.StoreSourceTopics[store], sp.Topic) {
						c := wire.TopicPartition{Topic: tp, Partition: sp.Partition}
						if !seen[c] {
							seen[c] = true
							out = append(out, c)
						}
					}
				}
			}
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

// taskChangelogs returns the changelog topics that may belong to the tasks
// of subtopology sub: all those with its task count. Summing more
// changelogs than the task has only raises the bound.
func (v *View) taskChangelogs(sub string, topics map[string]int) []string {
	var out []string
	for _, c := range v.changelogs {
		if topics[c] == v.taskCount[sub] {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// applyLagBounds sets each standby's lag to the bound: the end offsets of
// its task's changelogs minus the offset sum its instance reported when it
// joined (0 when it reported none: no local state). The true lag is at
// most this as long as the standby keeps its state, because its position
// only moves forward. ends maps changelog partitions to end offsets; a
// standby whose changelog end offsets are not all known keeps an unknown lag.
func (v *View) ApplyLagBounds(topics map[string]int, ends map[wire.TopicPartition]int64) {
	for i := range v.Routing.Instances {
		in := &v.Routing.Instances[i]
		for _, store := range in.StandbyStores {
			sub, ok := v.Info.StoreSubtopology[store]
			if !ok {
				continue
			}
			subID, _ := strconv.Atoi(sub) // classic subtopologies are numbers
			changelogs := v.taskChangelogs(sub, topics)
			for _, sp := range in.StandbyPartitions {
				if !slices.Contains(v.Routing.StoreSourceTopics[store], sp.Topic) {
					continue
				}
				var end int64
				known := len(changelogs) > 0
				for _, c := range changelogs {
					e, ok := ends[wire.TopicPartition{Topic: c, Partition: sp.Partition}]
					known = known && ok
					end += e
				}
				if !known {
					continue
				}
				cur := v.offsetSums[in.HostInfo][wire.TaskID{Subtopology: int32(subID), Partition: int32(sp.Partition)}]
				if cur < 0 { // LatestOffset: it ran the task active when it joined
					cur = 0
				}
				if in.Lags == nil {
					in.Lags = map[string]map[int]Lag{}
				}
				if in.Lags[store] == nil {
					in.Lags[store] = map[int]Lag{}
				}
				in.Lags[store][sp.Partition] = Lag{Current: cur, End: end, Lag: max(end-cur, 0), Bound: true}
			}
		}
	}
}
