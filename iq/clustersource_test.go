package iq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
	"github.com/azkafka/azkafka/iq/internal/wire/wiretest"
)

// streamsApp lays out a Kafka Streams application the way its assignor
// would: subtopology 0 reads left (4 partitions) and right (8), merged, with
// stores joined and leftcount; subtopology 1 reads in (6) into store plain;
// subtopology 2 is stateless (in -> repartition); subtopology 3 reads the
// repartition topic (5) into store rekeyed. Task (s, p) runs active on
// instance (s+p) mod n and standby on the next one.
type streamsApp struct {
	appID     string
	hosts     []HostInfo
	racks     []string
	tags      [][]wire.ClientTag
	subs      map[int32][]string
	topics    map[string]int
	offsetSum func(host int, t wire.TaskID) (int64, bool)
}

func newStreamsApp() *streamsApp {
	app := &streamsApp{
		appID: "app",
		hosts: []HostInfo{{"10.0.0.1", 7070}, {"10.0.0.2", 7070}, {"10.0.0.3", 7070}},
		racks: []string{"az-a", "", ""},
		tags:  [][]wire.ClientTag{nil, {{Key: "az", Value: "az-b"}}, nil},
		subs: map[int32][]string{
			0: {"left", "right"},
			1: {"in"},
			2: {"in2"},
			3: {"app-rekey-repartition"},
		},
		topics: map[string]int{
			"left": 4, "right": 8, "in": 6, "in2": 5, "app-rekey-repartition": 5,
			"app-joined-changelog": 8, "app-leftcount-changelog": 8, "app-plain-changelog": 6,
			"app-rekeyed-changelog": 5, "other": 3,
		},
	}
	app.offsetSum = func(host int, t wire.TaskID) (int64, bool) {
		if host == app.activeOf(t) {
			return wire.LatestOffset, true
		}
		return 100 * int64(t.Partition), true
	}
	return app
}

func (a *streamsApp) tasks() []wire.TaskID {
	var out []wire.TaskID
	for s := int32(0); s < int32(len(a.subs)); s++ {
		n := 0
		for _, t := range a.subs[s] {
			n = max(n, a.topics[t])
		}
		for p := range n {
			out = append(out, wire.TaskID{Subtopology: s, Partition: int32(p)})
		}
	}
	return out
}

func (a *streamsApp) activeOf(t wire.TaskID) int {
	return int(t.Subtopology+t.Partition) % len(a.hosts)
}
func (a *streamsApp) standbyOf(t wire.TaskID) int { return (a.activeOf(t) + 1) % len(a.hosts) }

// stateless reports the subtopologies without stores.
func (a *streamsApp) stateless(s int32) bool { return s == 2 }

func (a *streamsApp) taskPartitions(t wire.TaskID) []wire.TopicPartition {
	var out []wire.TopicPartition
	for _, topic := range a.subs[t.Subtopology] {
		if int(t.Partition) < a.topics[topic] {
			out = append(out, wire.TopicPartition{Topic: topic, Partition: int(t.Partition)})
		}
	}
	return out
}

// group returns the group as DescribeGroups describes it when Stable: one
// member per instance.
func (a *streamsApp) group() *describegroups.ResponseGroup {
	ai := &wire.AssignmentInfo{Version: 11, LatestSupportedVersion: 11}
	active := make([][]wire.TaskID, len(a.hosts))
	standby := make([][]wire.StandbyTask, len(a.hosts))
	for i, h := range a.hosts {
		hp, sp := wire.HostPartitions{Host: wire.HostInfo(h)}, wire.HostPartitions{Host: wire.HostInfo(h)}
		for _, t := range a.tasks() {
			if a.activeOf(t) == i {
				hp.Partitions = append(hp.Partitions, a.taskPartitions(t)...)
				active[i] = append(active[i], t)
			}
			if a.standbyOf(t) == i && !a.stateless(t.Subtopology) {
				sp.Partitions = append(sp.Partitions, a.taskPartitions(t)...)
				standby[i] = append(standby[i], wire.StandbyTask{Task: t, Partitions: a.taskPartitions(t)})
			}
		}
		ai.PartitionsByHost = append(ai.PartitionsByHost, hp)
		ai.StandbyPartitionsByHost = append(ai.StandbyPartitionsByHost, sp)
	}
	g := &describegroups.ResponseGroup{GroupID: a.appID, GroupState: "Stable", ProtocolType: "consumer", ProtocolData: "stream"}
	var allTopics []string
	for _, ts := range a.subs {
		allTopics = append(allTopics, ts...)
	}
	for i, h := range a.hosts {
		si := &wire.SubscriptionInfo{Version: 11, LatestSupportedVersion: 11, UserEndpoint: h.String(), ClientTags: a.tags[i]}
		si.ProcessID[0] = byte(i + 1)
		for _, t := range a.tasks() {
			if a.stateless(t.Subtopology) {
				continue
			}
			if off, ok := a.offsetSum(i, t); ok {
				si.TaskOffsetSums = append(si.TaskOffsetSums, wire.TaskOffsetSum{Task: t, OffsetSum: off})
			}
		}
		sub := &wire.ConsumerSubscription{Version: 3, Topics: allTopics, UserData: wiretest.EncodeSubscriptionInfo(si), RackID: a.racks[i]}
		// Assigned partitions in topic, partition order, paired with tasks.
		type pair struct {
			tp wire.TopicPartition
			t  wire.TaskID
		}
		var pairs []pair
		for _, t := range active[i] {
			for _, tp := range a.taskPartitions(t) {
				pairs = append(pairs, pair{tp, t})
			}
		}
		slices.SortFunc(pairs, func(x, y pair) int {
			return cmp.Or(strings.Compare(x.tp.Topic, y.tp.Topic), cmp.Compare(x.tp.Partition, y.tp.Partition))
		})
		mine := *ai
		mine.ActiveTasks = nil
		var parts []wire.TopicPartition
		for _, p := range pairs {
			mine.ActiveTasks = append(mine.ActiveTasks, p.t)
			parts = append(parts, p.tp)
		}
		mine.StandbyTasks = standby[i]
		// The wire groups partitions by topic; shuffle the order the
		// broker returns them in, as the decoder must sort them itself.
		slices.Reverse(parts)
		asg := &wire.ConsumerAssignment{Version: 3, Partitions: parts, UserData: wiretest.EncodeAssignmentInfo(&mine)}
		g.Members = append(g.Members, describegroups.ResponseGroupMember{
			MemberID:         fmt.Sprintf("app-%d-StreamThread-1-consumer-%d", i, i),
			ClientID:         fmt.Sprintf("app-%d-StreamThread-1-consumer", i),
			MemberMetadata:   wiretest.EncodeConsumerSubscription(sub),
			MemberAssignment: wiretest.EncodeConsumerAssignment(asg),
		})
	}
	return g
}

type fakeCluster struct {
	mu     sync.Mutex
	group  *describegroups.ResponseGroup
	counts map[string]int
	ends   map[wire.TopicPartition]int64
	err    error
	asked  []wire.TopicPartition
	// streams is the group StreamsGroupDescribe returns; nil: not found.
	streams *kmsg.StreamsGroupDescribeResponseGroup
}

func (f *fakeCluster) describeGroup(ctx context.Context, group string) (*describegroups.ResponseGroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	g := *f.group
	return &g, nil
}

func (f *fakeCluster) describeStreamsGroup(ctx context.Context, group string) (*kmsg.StreamsGroupDescribeResponseGroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams == nil {
		g := kmsg.NewStreamsGroupDescribeResponseGroup()
		g.Group, g.ErrorCode = group, 69
		return &g, nil
	}
	g := *f.streams
	return &g, nil
}

func (f *fakeCluster) topics(ctx context.Context) (map[string]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.counts), nil
}

func (f *fakeCluster) endOffsets(ctx context.Context, tps []wire.TopicPartition) (map[wire.TopicPartition]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, tps...)
	out := map[wire.TopicPartition]int64{}
	for _, tp := range tps {
		out[tp] = f.ends[tp]
	}
	return out, nil
}

func (f *fakeCluster) set(g *describegroups.ResponseGroup, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.group, f.err = g, err
}

func newTestClusterSource(t *testing.T, app *streamsApp, opts ...Option) (*Source, *fakeCluster) {
	t.Helper()
	fc := &fakeCluster{group: app.group(), counts: app.topics, ends: map[wire.TopicPartition]int64{}}
	for topic, n := range app.topics {
		for p := range n {
			fc.ends[wire.TopicPartition{Topic: topic, Partition: p}] = 1000 + int64(p)
		}
	}
	opts = append([]Option{WithLogger(quietLogger()), option{"withAPI", forCluster, func(c *config) { c.api = fc }}}, opts...)
	s, err := NewClusterSource([]string{"127.0.0.1:9092"}, app.appID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, fc
}

func TestClusterSourceRoutes(t *testing.T) {
	app := newStreamsApp()
	s, _ := newTestClusterSource(t, app, WithStoreTopics("leftcount", "left"))
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := s.snapshot()
	cases := []struct {
		store string
		sub   int32
		width int
	}{
		{"plain", 1, 6},
		{"rekeyed", 3, 5},
		{"leftcount", 0, 4}, // given: left only
	}
	for _, c := range cases {
		for i := range 200 {
			key := []byte(fmt.Sprintf("key-%d", i))
			r, err := snap.Route(c.store, key)
			if err != nil {
				t.Fatalf("%s %s: %v", c.store, key, err)
			}
			p := Partition(key, c.width)
			task := wire.TaskID{Subtopology: c.sub, Partition: int32(p)}
			if r.Partition != p || r.Active.HostInfo != app.hosts[app.activeOf(task)] {
				t.Fatalf("%s %s: got partition %d active %s, want %d %s", c.store, key, r.Partition, r.Active.HostInfo, p, app.hosts[app.activeOf(task)])
			}
			if len(r.Standbys) != 1 || r.Standbys[0].HostInfo != app.hosts[app.standbyOf(task)] {
				t.Fatalf("%s %s: standbys %v, want %s", c.store, key, r.Standbys, app.hosts[app.standbyOf(task)])
			}
		}
	}
	// joined reads left and right (4 and 8 partitions): the group cannot
	// tell which of them feed it.
	_, err := snap.Route("joined", []byte("k"))
	if !errors.Is(err, ErrStoreTopicsUnknown) || !strings.Contains(err.Error(), `iq.WithStoreTopics("joined", topics...)`) ||
		!strings.Contains(err.Error(), "left: 4, right: 8") {
		t.Errorf("joined: %v", err)
	}
	if _, err := snap.Route("nosuch", []byte("k")); !errors.Is(err, ErrUnknownStore) {
		t.Errorf("nosuch: %v", err)
	}
	g := iqinspect.GroupOf(s)
	if g.Protocol != "classic" || g.State != "Stable" || len(g.Members) != 3 || g.StoreSubtopology["plain"] != "1" || g.StoreSubtopology["rekeyed"] != "3" {
		t.Errorf("group info: %+v", g)
	}
}

func TestClusterSourceAZ(t *testing.T) {
	app := newStreamsApp()
	s, _ := newTestClusterSource(t, app)
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[HostInfo]string{}
	for _, in := range s.snapshot().Metadata().Instances {
		got[in.HostInfo] = in.AZ
	}
	want := map[HostInfo]string{app.hosts[0]: "az-a", app.hosts[1]: "az-b", app.hosts[2]: ""}
	if !maps.Equal(got, want) {
		t.Errorf("AZ from rack, else tag az, else unknown: got %v, want %v", got, want)
	}
	t.Setenv(envAZTag, "zone")
	app.tags[2] = []wire.ClientTag{{Key: "zone", Value: "az-c"}}
	s2, _ := newTestClusterSource(t, app)
	if err := s2.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, in := range s2.snapshot().Metadata().Instances {
		if in.HostInfo == app.hosts[2] && in.AZ != "az-c" {
			t.Errorf("%s=zone: instance 3 AZ %q, want az-c", envAZTag, in.AZ)
		}
		if in.HostInfo == app.hosts[1] && in.AZ != "" {
			t.Errorf("%s=zone: instance 2 AZ %q, want none (its tag is az)", envAZTag, in.AZ)
		}
	}
}

func TestClusterSourceLagBound(t *testing.T) {
	app := newStreamsApp()
	s, fc := newTestClusterSource(t, app)
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := s.snapshot()
	for i := range 100 {
		key := []byte(fmt.Sprintf("k%d", i))
		r, err := snap.Route("plain", key)
		if err != nil {
			t.Fatal(err)
		}
		sb := r.Standbys[0]
		// plain is the only changelog with 6 partitions: the bound is its
		// end offset minus the offset sum the standby reported.
		end := 1000 + int64(r.Partition)
		cur := 100 * int64(r.Partition)
		if !sb.LagKnown || sb.Lag != (Lag{Current: cur, End: end, Lag: end - cur, Bound: true}) {
			t.Fatalf("%s: standby lag %+v known %v, want bound %d", key, sb.Lag, sb.LagKnown, end-cur)
		}
		if r.Active.LagKnown {
			t.Fatalf("%s: active lag known %+v; the group does not tell it", key, r.Active.Lag)
		}
	}
	for _, tp := range fc.asked {
		if !strings.HasSuffix(tp.Topic, "-changelog") {
			t.Errorf("end offset asked of %v, not a changelog", tp)
		}
	}
	// A standby that reported no offset sum has no local state: the bound
	// is the whole changelog.
	app.offsetSum = func(int, wire.TaskID) (int64, bool) { return 0, false }
	fc.set(app.group(), nil)
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := s.snapshot().Route("plain", []byte("k1"))
	if l := r.Standbys[0].Lag; l.Lag != 1000+int64(r.Partition) || !l.Bound {
		t.Errorf("no offset sum: lag %+v", l)
	}
}

func TestClusterSourceBadInput(t *testing.T) {
	app := newStreamsApp()
	s, fc := newTestClusterSource(t, app)
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	good := s.snapshot()
	member := func(mod func(m *describegroups.ResponseGroupMember)) *describegroups.ResponseGroup {
		g := app.group()
		g.Members = slices.Clone(g.Members)
		mod(&g.Members[1])
		return g
	}
	withAI := func(mod func(ai *wire.AssignmentInfo)) *describegroups.ResponseGroup {
		return member(func(m *describegroups.ResponseGroupMember) {
			asg, _ := wire.DecodeConsumerAssignment(m.MemberAssignment)
			ai, _ := wire.DecodeAssignmentInfo(asg.UserData)
			mod(ai)
			asg.UserData = wiretest.EncodeAssignmentInfo(ai)
			m.MemberAssignment = wiretest.EncodeConsumerAssignment(asg)
		})
	}
	withSI := func(mod func(si *wire.SubscriptionInfo)) *describegroups.ResponseGroup {
		return member(func(m *describegroups.ResponseGroupMember) {
			sub, _ := wire.DecodeConsumerSubscription(m.MemberMetadata)
			si, _ := wire.DecodeSubscriptionInfo(sub.UserData)
			mod(si)
			sub.UserData = wiretest.EncodeSubscriptionInfo(si)
			m.MemberMetadata = wiretest.EncodeConsumerSubscription(sub)
		})
	}
	m1 := `member "app-1-StreamThread-1-consumer-1"`
	cases := []struct {
		name string
		g    *describegroups.ResponseGroup
		err  error
		is   error
		want []string
	}{
		{"broker error", nil, errors.New("dial tcp: connection refused"), nil, []string{`group "app": DescribeGroups: dial tcp: connection refused`}},
		{"not found", &describegroups.ResponseGroup{GroupID: "app", GroupState: "Dead"}, nil, ErrGroupNotFound, []string{`group "app": state "Dead" with 0 members`}},
		{"empty", &describegroups.ResponseGroup{GroupID: "app", GroupState: "Empty", ProtocolType: "consumer"}, nil, ErrGroupNotFound, []string{`state "Empty"`}},
		{"rebalancing", func() *describegroups.ResponseGroup {
			g := app.group()
			g.GroupState = "PreparingRebalance"
			for i := range g.Members {
				g.Members[i].MemberMetadata = nil
			}
			return g
		}(), nil, ErrRebalancing, []string{`group "app": state "PreparingRebalance"`, "keeping the last good routing"}},
		{"connect group", func() *describegroups.ResponseGroup { g := app.group(); g.ProtocolType = "connect"; return g }(), nil, ErrNotStreamsGroup, []string{`protocol type "connect"`}},
		{"plain consumer group", func() *describegroups.ResponseGroup { g := app.group(); g.ProtocolData = "range"; return g }(), nil, ErrNotStreamsGroup, []string{`assignor "range"`}},
		{"AssignmentInfo v12", withAI(func(ai *wire.AssignmentInfo) { ai.Version = 12 }), nil, ErrUnsupportedVersion, []string{m1, "AssignmentInfo: field version: AssignmentInfo version 12"}},
		{"SubscriptionInfo v12", withSI(func(si *wire.SubscriptionInfo) { si.Version = 12 }), nil, ErrUnsupportedVersion, []string{m1, "SubscriptionInfo: field version: SubscriptionInfo version 12"}},
		{"garbage metadata", member(func(m *describegroups.ResponseGroupMember) { m.MemberMetadata = []byte{0, 3, 0, 0} }), nil, nil, []string{m1, "member metadata: field subscription.topics at byte 2"}},
		{"garbage assignment", member(func(m *describegroups.ResponseGroupMember) { m.MemberAssignment = m.MemberAssignment[:20] }), nil, nil, []string{m1, "member assignment: field"}},
		{"bad endpoint", withSI(func(si *wire.SubscriptionInfo) { si.UserEndpoint = "nohost" }), nil, nil, []string{m1, `field userEndPoint: "nohost": not host:port`}},
		{"assignor error", withAI(func(ai *wire.AssignmentInfo) { ai.ErrorCode = 1 }), nil, nil, []string{m1, "field errorCode: 1"}},
		{"tasks and partitions differ", withAI(func(ai *wire.AssignmentInfo) { ai.ActiveTasks = ai.ActiveTasks[1:] }), nil, nil, []string{m1, "field activeTasks"}},
	}
	for _, c := range cases {
		fc.set(c.g, c.err)
		err := s.Refresh(context.Background())
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.name, err, c.is)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\n does not contain %q", c.name, err, w)
			}
		}
		if s.snapshot() != good {
			t.Errorf("%s: the last good routing was replaced", c.name)
		}
		if _, last := s.LastPoll(); last == nil {
			t.Errorf("%s: LastPoll has no error", c.name)
		}
	}
	fc.set(app.group(), nil)
	if err := s.Refresh(context.Background()); err != nil || s.snapshot() == good {
		t.Errorf("recovery: %v", err)
	}
}

func TestClusterSourceOptions(t *testing.T) {
	for _, c := range []struct {
		brokers []string
		app     string
		opts    []Option
		want    string
	}{
		{nil, "app", nil, "no broker address"},
		{[]string{"nohost"}, "app", nil, `broker "nohost": want host:port`},
		{[]string{"h:9092"}, "", nil, "empty application.id"},
		{[]string{"h:9092"}, "app", []Option{WithPollInterval(0)}, "interval 0s"},
		{[]string{"h:9092"}, "app", []Option{WithStoreTopics("s")}, `WithStoreTopics("s", "")`},
	} {
		_, err := NewClusterSource(c.brokers, c.app, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q: got %v, want %q", c.brokers, c.app, err, c.want)
		}
	}
}

// FuzzBuildClassic feeds arbitrary member metadata and assignment bytes to
// the group reader: it must fail cleanly or produce a valid snapshot.
func FuzzBuildClassic(f *testing.F) {
	app := newStreamsApp()
	g := app.group()
	f.Add(g.Members[0].MemberMetadata, g.Members[0].MemberAssignment)
	f.Add(g.Members[1].MemberMetadata, g.Members[2].MemberAssignment)
	f.Fuzz(func(t *testing.T, meta, asg []byte) {
		g := app.group()
		g.Members[0].MemberMetadata, g.Members[0].MemberAssignment = meta, asg
		v, err := group.Classic(g, group.Config{AppID: "app", Topics: app.topics, AZTag: "az"})
		if err != nil {
			return
		}
		v.ApplyLagBounds(app.topics, map[wire.TopicPartition]int64{})
		if snap, err := newSnapshot(groupMetadata(v.Routing)); err == nil {
			_, _ = snap.Route("plain", []byte("k"))
		}
	})
}
