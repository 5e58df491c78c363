package iq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// streamsResponse encodes groups as a StreamsGroupDescribe v0 response body
// with franz-go's kmsg, an encoder independent of ours.
func streamsResponse(groups ...kmsg.StreamsGroupDescribeResponseGroup) []byte {
	resp := kmsg.NewStreamsGroupDescribeResponse()
	resp.Version = 0
	resp.Groups = groups
	return resp.AppendTo(nil)
}

func TestDecodeStreamsGroupDescribe(t *testing.T) {
	app := newStreamsApp()
	groups, err := DecodeStreamsGroupDescribe(streamsResponse(*app.streamsGroup()))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 {
		t.Fatalf("%d groups", len(groups))
	}
	g := groups[0]
	if g.GroupID != "app" || g.GroupState != "Stable" || len(g.Subtopologies) != 4 || len(g.Members) != 3 {
		t.Fatalf("group %+v", g)
	}
	if st := g.Subtopologies[3]; st.ID != "3" || len(st.SourceTopics) != 0 ||
		!reflect.DeepEqual(st.RepartitionSourceTopics, []StreamsTopicInfo{{"app-rekey-repartition", 5}}) ||
		!reflect.DeepEqual(st.StateChangelogTopics, []StreamsTopicInfo{{"app-rekeyed-changelog", 5}}) {
		t.Errorf("subtopology 3: %+v", st)
	}
	m := g.Members[1]
	if m.MemberID != "member-1" || m.ProcessID != "process-1" || m.Endpoint != app.hosts[1] || m.RackID != "" ||
		!reflect.DeepEqual(m.ClientTags, []ClientTag{{"az", "az-b"}}) || len(m.Active) == 0 || len(m.Standby) == 0 ||
		!reflect.DeepEqual(m.Warmup, []StreamsTasks{{"1", []int32{1}}}) {
		t.Errorf("member 1: %+v", m)
	}
	// Errors name the field.
	b := streamsResponse(*app.streamsGroup())
	for _, cut := range []int{3, 10, len(b) / 2, len(b) - 1} {
		if _, err := DecodeStreamsGroupDescribe(b[:cut]); err == nil || !strings.Contains(err.Error(), "field ") {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
}

func TestStreamsGroupDescribeRequest(t *testing.T) {
	b := appendStreamsGroupDescribeRequest(nil, 7, "cid", "app")
	if int(binary.BigEndian.Uint32(b)) != len(b)-4 {
		t.Fatalf("size %d for %d bytes", binary.BigEndian.Uint32(b), len(b)-4)
	}
	r := &wireReader{b: b[4:]}
	if k, v, c := r.int16(""), r.int16(""), r.int32(""); k != 89 || v != 0 || c != 7 {
		t.Fatalf("header %d %d %d", k, v, c)
	}
	if id, _ := r.string16("", false); id != "cid" {
		t.Fatalf("client id %q", id)
	}
	r.taggedFields("header")
	req := kmsg.NewStreamsGroupDescribeRequest()
	req.Version = 0
	if err := req.ReadFrom(b[4+r.off:]); err != nil || !reflect.DeepEqual(req.Groups, []string{"app"}) || req.IncludeAuthorizedOperations {
		t.Fatalf("kmsg reads %+v, %v", req, err)
	}
}

func TestClusterSourceStreamsProtocol(t *testing.T) {
	app := newStreamsApp()
	s, fc := newTestClusterSource(t, app, WithStoreTopics("leftcount", "left"))
	groups, err := DecodeStreamsGroupDescribe(streamsResponse(*app.streamsGroup()))
	if err != nil {
		t.Fatal(err)
	}
	fc.set(&describeGroupDead, nil)
	fc.streams = &groups[0]
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g := s.Group(); g.Protocol != "streams" || g.State != "Stable" || g.StoreSubtopology["plain"] != "1" || g.StoreSubtopology["rekeyed"] != "3" {
		t.Fatalf("group %+v", g)
	}
	snap := s.Snapshot()
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
			task := TaskID{Subtopology: c.sub, Partition: int32(Partition(key, c.width))}
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
	good := s.Snapshot()
	for _, c := range []struct {
		mod  func(g *StreamsGroup)
		want string
	}{
		{func(g *StreamsGroup) { g.ErrorCode = 69 }, `state "Dead" with 0 members`}, // not found: the classic answer stands
		{func(g *StreamsGroup) { g.ErrorCode = 30; g.ErrorMessage = "denied" }, "GROUP_AUTHORIZATION_FAILED: denied"},
		{func(g *StreamsGroup) { g.Members = nil }, `state "Stable" with 0 members`},
		{func(g *StreamsGroup) { g.Subtopologies = nil }, "no topology yet"},
		{func(g *StreamsGroup) { g.Members[0].Active = []StreamsTasks{{"9", []int32{0}}} }, `member "member-0": field assignment.activeTasks: subtopology "9" is not in the topology`},
	} {
		g := groups[0]
		g.Members = append([]StreamsMember(nil), g.Members...)
		c.mod(&g)
		fc.mu.Lock()
		fc.streams = &g
		fc.mu.Unlock()
		err := s.Refresh(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `group "app"`) {
			t.Errorf("got %v, want it to contain %q", err, c.want)
		}
		if s.Snapshot() != good {
			t.Errorf("%q: last good routing replaced", c.want)
		}
	}
}

var describeGroupDead = describeGroupsDead()

func FuzzDecodeStreamsGroupDescribe(f *testing.F) {
	app := newStreamsApp()
	f.Add(streamsResponse(*app.streamsGroup()))
	f.Fuzz(func(t *testing.T, b []byte) {
		groups, err := DecodeStreamsGroupDescribe(b)
		if err != nil {
			return
		}
		for i := range groups {
			v, err := buildStreams(&groups[i], buildConfig{appID: "app", topics: app.topics, azTag: "az"})
			if err != nil {
				continue
			}
			if snap, err := NewSnapshot(v.md); err == nil {
				_, _ = snap.Route("plain", []byte("k"))
			}
		}
	})
}

func describeGroupsDead() describegroups.ResponseGroup {
	return describegroups.ResponseGroup{GroupID: "app", GroupState: "Dead"}
}
