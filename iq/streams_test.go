package iq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// streamsSubtopologies lays out the streamsApp's topology as the streams
// protocol describes it: subtopology IDs are strings, repartition topics are
// repartition sources with their partition count.
func (a *streamsApp) streamsGroup() *kmsg.StreamsGroupDescribeResponseGroup {
	g := kmsg.NewStreamsGroupDescribeResponseGroup()
	g.Group, g.State, g.Epoch, g.AssignmentEpoch = a.appID, "Stable", 5, 5
	topo := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
	changelogs := map[int32][]string{0: {"app-joined-changelog", "app-leftcount-changelog"}, 1: {"app-plain-changelog"}, 3: {"app-rekeyed-changelog"}}
	for s := int32(0); s < int32(len(a.subs)); s++ {
		st := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
		st.SubtopologyID = fmt.Sprint(s)
		for _, t := range a.subs[s] {
			if strings.HasSuffix(t, "-repartition") {
				ti := kmsg.NewTopicInfo()
				ti.Topic, ti.NumPartitions, ti.ReplicationFactor = t, int32(a.topics[t]), 3
				st.RepartitionSourceTopics = append(st.RepartitionSourceTopics, ti)
			} else {
				st.SourceTopics = append(st.SourceTopics, t)
			}
		}
		if s == 2 {
			st.RepartitionSinkTopics = []string{"app-rekey-repartition"}
		}
		for _, c := range changelogs[s] {
			ti := kmsg.NewTopicInfo()
			ti.Topic, ti.NumPartitions, ti.ReplicationFactor = c, int32(a.topics[c]), 3
			cfg := kmsg.NewTopicInfoConfig()
			cfg.Key, cfg.Value = "cleanup.policy", "compact"
			ti.Configs = append(ti.Configs, cfg)
			st.StateChangelogTopics = append(st.StateChangelogTopics, ti)
		}
		topo.Subtopologies = append(topo.Subtopologies, st)
	}
	g.Topology = &topo
	for i, h := range a.hosts {
		m := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		m.MemberID = fmt.Sprintf("member-%d", i)
		m.ClientID = fmt.Sprintf("app-%d-StreamThread-1", i)
		m.ClientHost = "/10.0.0.9"
		m.ProcessID = fmt.Sprintf("process-%d", i)
		if a.racks[i] != "" {
			rack := a.racks[i]
			m.RackID = &rack
		}
		ep := kmsg.NewStreamsGroupDescribeResponseGroupMemberUserEndpoint()
		ep.Host, ep.Port = h.Host, uint16(h.Port)
		m.UserEndpoint = &ep
		for _, tag := range a.tags[i] {
			ct := kmsg.NewStreamsGroupDescribeResponseGroupMemberClientTag()
			ct.Key, ct.Value = tag.Key, tag.Value
			m.ClientTags = append(m.ClientTags, ct)
		}
		act, sb := map[int32][]int32{}, map[int32][]int32{}
		for _, t := range a.tasks() {
			if a.activeOf(t) == i {
				act[t.Subtopology] = append(act[t.Subtopology], t.Partition)
			}
			if a.standbyOf(t) == i && !a.stateless(t.Subtopology) {
				sb[t.Subtopology] = append(sb[t.Subtopology], t.Partition)
			}
		}
		for s := int32(0); s < int32(len(a.subs)); s++ {
			if ps := act[s]; len(ps) > 0 {
				m.Assignment.ActiveTasks = append(m.Assignment.ActiveTasks, kmsg.TaskIDs{SubtopologyID: fmt.Sprint(s), Partitions: ps})
			}
			if ps := sb[s]; len(ps) > 0 {
				m.Assignment.StandbyTasks = append(m.Assignment.StandbyTasks, kmsg.TaskIDs{SubtopologyID: fmt.Sprint(s), Partitions: ps})
			}
		}
		// A warm-up is not a queryable copy.
		m.Assignment.WarmupTasks = []kmsg.TaskIDs{{SubtopologyID: "1", Partitions: []int32{int32(i)}}}
		m.TargetAssignment = m.Assignment
		g.Members = append(g.Members, m)
	}
	return &g
}

// streamsResponse encodes groups as a StreamsGroupDescribe v0 response
// body.
func streamsResponse(groups ...kmsg.StreamsGroupDescribeResponseGroup) []byte {
	resp := kmsg.NewStreamsGroupDescribeResponse()
	resp.Version = 0
	resp.Groups = groups
	return resp.AppendTo(nil)
}

func TestClusterSourceStreamsProtocol(t *testing.T) {
	app := newStreamsApp()
	s, fc := newTestClusterSource(t, app, WithStoreTopics("leftcount", "left"))
	groups := []kmsg.StreamsGroupDescribeResponseGroup{*app.streamsGroup()}
	fc.set(&describeGroupDead, nil)
	fc.streams = &groups[0]
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g := iqinspect.GroupOf(s); g.Protocol != "streams" || g.State != "Stable" || g.StoreSubtopology["plain"] != "1" || g.StoreSubtopology["rekeyed"] != "3" {
		t.Fatalf("group %+v", g)
	}
	snap := s.snapshot()
	for _, c := range []struct {
		store string
		sub   int32
		width int
	}{{"plain", 1, 6}, {"rekeyed", 3, 5}, {"leftcount", 0, 4}} {
		for i := range 200 {
			key := []byte(fmt.Sprintf("key-%d", i))
			r, err := snap.Route(c.store, key)
			if err != nil {
				t.Fatalf("%s %s: %v", c.store, key, err)
			}
			task := wire.TaskID{Subtopology: c.sub, Partition: int32(Partition(key, c.width))}
			if r.Partition != int(task.Partition) || r.Active.HostInfo != app.hosts[app.activeOf(task)] ||
				len(r.Standbys) != 1 || r.Standbys[0].HostInfo != app.hosts[app.standbyOf(task)] || r.Standbys[0].LagKnown {
				t.Fatalf("%s %s: %+v, want partition %d active %s standby %s, lag unknown", c.store, key, r, task.Partition,
					app.hosts[app.activeOf(task)], app.hosts[app.standbyOf(task)])
			}
		}
	}
	if _, err := snap.Route("joined", []byte("k")); !errors.Is(err, ErrStoreTopicsUnknown) || !strings.Contains(err.Error(), `iq.WithStoreTopics("joined"`) {
		t.Errorf("joined: %v", err)
	}
	// No instance is given a partition its topic does not have
	// (KAFKA-20885: task 5 of subtopology 0 has right-5 but no left-5).
	for _, in := range snap.Metadata().Instances {
		for _, tp := range append(in.ActivePartitions, in.StandbyPartitions...) {
			if tp.Partition >= app.topics[tp.Topic] {
				t.Errorf("%s lists %s-%d; %s has %d partitions", in.HostInfo, tp.Topic, tp.Partition, tp.Topic, app.topics[tp.Topic])
			}
		}
		if want := map[string]string{"10.0.0.1": "az-a", "10.0.0.2": "az-b", "10.0.0.3": ""}[in.Host]; in.AZ != want {
			t.Errorf("%s AZ %q, want %q", in.HostInfo, in.AZ, want)
		}
	}

	// Bad input keeps the last good routing.
	good := s.snapshot()
	for _, c := range []struct {
		mod  func(g *kmsg.StreamsGroupDescribeResponseGroup)
		want string
	}{
		{func(g *kmsg.StreamsGroupDescribeResponseGroup) { g.ErrorCode = 69 }, `state "Dead" with 0 members`}, // not found: the classic answer stands
		{func(g *kmsg.StreamsGroupDescribeResponseGroup) {
			g.ErrorCode = 30
			g.ErrorMessage = kmsg.StringPtr("denied")
		}, "GROUP_AUTHORIZATION_FAILED: denied"},
		{func(g *kmsg.StreamsGroupDescribeResponseGroup) { g.Members = nil }, `state "Stable" with 0 members`},
		{func(g *kmsg.StreamsGroupDescribeResponseGroup) { g.Topology = nil }, "no topology yet"},
		{func(g *kmsg.StreamsGroupDescribeResponseGroup) {
			g.Members[0].Assignment.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "9", Partitions: []int32{0}}}
		}, `member "member-0": field assignment.activeTasks: subtopology "9" is not in the topology`},
	} {
		g := groups[0]
		g.Members = append([]kmsg.StreamsGroupDescribeResponseGroupMember(nil), g.Members...)
		c.mod(&g)
		fc.mu.Lock()
		fc.streams = &g
		fc.mu.Unlock()
		err := s.Refresh(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `group "app"`) {
			t.Errorf("got %v, want it to contain %q", err, c.want)
		}
		if s.snapshot() != good {
			t.Errorf("%q: last good routing replaced", c.want)
		}
	}
}

var describeGroupDead = describeGroupsDead()

// FuzzDecodeStreamsGroupDescribe feeds arbitrary StreamsGroupDescribe
// response bodies to kmsg's decoder and what decodes to the group reader:
// it must fail cleanly or produce a valid snapshot.
func FuzzDecodeStreamsGroupDescribe(f *testing.F) {
	app := newStreamsApp()
	f.Add(streamsResponse(*app.streamsGroup()))
	f.Fuzz(func(t *testing.T, b []byte) {
		resp := kmsg.NewPtrStreamsGroupDescribeResponse()
		resp.Version = 0
		if err := resp.ReadFrom(b); err != nil {
			return
		}
		for i := range resp.Groups {
			v, err := group.Streams(&resp.Groups[i], group.Config{AppID: "app", Topics: app.topics, AZTag: "az"})
			if err != nil {
				continue
			}
			if snap, err := newSnapshot(groupMetadata(v.Routing)); err == nil {
				_, _ = snap.Route("plain", []byte("k"))
			}
		}
	})
}

func describeGroupsDead() describegroups.ResponseGroup {
	return describegroups.ResponseGroup{GroupID: "app", GroupState: "Dead"}
}
