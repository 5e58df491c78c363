package iq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func tp(topic string, parts ...int) []TopicPartition {
	var out []TopicPartition
	for _, p := range parts {
		out = append(out, TopicPartition{topic, p})
	}
	return out
}

// threeHosts: store "counts" reads topic "in" (3 partitions). a is active for
// 0, b for 1, c for 2; standbys are the next host round.
func threeHosts() Metadata {
	return Metadata{
		StoreSourceTopics: map[string][]string{"counts": {"in"}},
		TopicPartitions:   map[string]int{"in": 3},
		Instances: []Instance{
			{HostInfo: HostInfo{"c", 1}, AZ: "az3", ActiveStores: []string{"counts"}, ActivePartitions: tp("in", 2),
				StandbyStores: []string{"counts"}, StandbyPartitions: tp("in", 1)},
			{HostInfo: HostInfo{"a", 1}, AZ: "az1", ActiveStores: []string{"counts"}, ActivePartitions: tp("in", 0),
				StandbyStores: []string{"counts"}, StandbyPartitions: tp("in", 2),
				Lags: map[string]map[int]Lag{"counts": {0: {10, 10, 0, false}, 2: {5, 25, 20, false}}}},
			{HostInfo: HostInfo{"b", 1}, AZ: "az2", ActiveStores: []string{"counts"}, ActivePartitions: tp("in", 1),
				StandbyStores: []string{"counts"}, StandbyPartitions: tp("in", 0)},
		},
	}
}

func hosts(rs []Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.HostInfo.String())
	}
	return out
}

func TestRoute(t *testing.T) {
	// Hand-built metadata; keys from the published values: KH01 -> 0,
	// KH07 -> 2, KH32 -> 1 of 3 partitions, and KH01, KH07 -> 6, KH32 -> 1 of 8.
	twoTopics := threeHosts()
	twoTopics.StoreSourceTopics["joined"] = []string{"in", "wide"}
	twoTopics.TopicPartitions["wide"] = 8
	twoTopics.Instances[0].ActiveStores = append(twoTopics.Instances[0].ActiveStores, "joined")
	twoTopics.Instances[0].ActivePartitions = append(twoTopics.Instances[0].ActivePartitions, tp("wide", 6)...)
	twoTopics.Instances[2].StandbyStores = append(twoTopics.Instances[2].StandbyStores, "joined")
	twoTopics.Instances[2].StandbyPartitions = append(twoTopics.Instances[2].StandbyPartitions, tp("wide", 6, 1)...)

	// Two instances claim partition 0 active (mid-rebalance views): Java
	// keeps the last in host, port order.
	twoActive := threeHosts()
	twoActive.Instances = append(twoActive.Instances, Instance{HostInfo: HostInfo{"a", 2},
		ActiveStores: []string{"counts"}, ActivePartitions: tp("in", 0)})

	tests := []struct {
		name      string
		md        Metadata
		store     string
		key       string
		partition int
		active    string
		standbys  []string
		err       error
	}{
		{"partition 0", threeHosts(), "counts", "KH01", 0, "a:1", []string{"b:1"}, nil},
		{"partition 2", threeHosts(), "counts", "KH07", 2, "c:1", []string{"a:1"}, nil},
		{"partition 1", threeHosts(), "counts", "KH32", 1, "b:1", []string{"c:1"}, nil},
		{"topic with most partitions decides", twoTopics, "joined", "KH07", 6, "c:1", []string{"b:1"}, nil},
		{"partition beyond smaller topic", twoTopics, "joined", "KH32", 1, "", []string{"b:1"}, ErrNotAvailable},
		{"last active in host order wins", twoActive, "counts", "KH01", 0, "a:2", []string{"b:1"}, nil},
		{"unknown store", threeHosts(), "nope", "KH01", -1, "", nil, ErrUnknownStore},
		{"topic count unknown", Metadata{StoreSourceTopics: map[string][]string{"counts": {"in"}}}, "counts", "KH01", -1, "", nil, ErrNotAvailable},
		{"no instances yet", Metadata{StoreSourceTopics: map[string][]string{"counts": {"in"}}, TopicPartitions: map[string]int{"in": 3}}, "counts", "KH01", 0, "", nil, ErrNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := newSnapshot(tt.md)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Route(tt.store, []byte(tt.key))
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if r.Partition != tt.partition {
				t.Errorf("partition = %d, want %d", r.Partition, tt.partition)
			}
			active := ""
			if r.Active != nil {
				active = r.Active.HostInfo.String()
			}
			if active != tt.active {
				t.Errorf("active = %q, want %q", active, tt.active)
			}
			if got := hosts(r.Standbys); !slices.Equal(got, tt.standbys) {
				t.Errorf("standbys = %v, want %v", got, tt.standbys)
			}
		})
	}
}

func TestRouteLagsAndAZ(t *testing.T) {
	s, err := newSnapshot(threeHosts())
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.Route("counts", []byte("KH07")) // partition 2: active c, standby a (lag 20)
	if r.Active.LagKnown || r.Active.AZ != "az3" {
		t.Errorf("active = %+v, want unknown lag in az3", *r.Active)
	}
	if sb := r.Standbys[0]; !sb.LagKnown || sb.Lag != (Lag{5, 25, 20, false}) || sb.AZ != "az1" || sb.Active {
		t.Errorf("standby = %+v, want lag {5 25 20} in az1", sb)
	}
}

func TestRouteNilSnapshotIsNotAvailable(t *testing.T) {
	var s *snapshot
	if _, err := s.Route("counts", []byte("k")); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestRouteWithCustomPartitioner(t *testing.T) {
	s, _ := newSnapshot(threeHosts())
	var gotTopic string
	var gotN int
	p := func(topic string, key []byte, n int) int { gotTopic, gotN = topic, n; return int(key[0] - '0') }
	c, err := NewClient(sourceOf(s), WithPartitioner(p), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Route("counts", []byte("2"))
	if err != nil || r.Partition != 2 || r.Active.Host != "c" || gotTopic != "in" || gotN != 3 {
		t.Fatalf("route = %+v, %v; partitioner saw %q/%d", r, err, gotTopic, gotN)
	}
	if _, err := c.Route("counts", []byte("7")); err == nil {
		t.Fatal("out-of-range partition accepted")
	}
}

func TestNewSnapshotRejectsBadMetadata(t *testing.T) {
	dup := threeHosts()
	dup.Instances = append(dup.Instances, dup.Instances[0])
	badPort := threeHosts()
	badPort.Instances[1].Port = 0
	neg := threeHosts()
	neg.TopicPartitions["in"] = -1
	for name, md := range map[string]Metadata{"duplicate": dup, "port": badPort, "negative": neg} {
		if _, err := newSnapshot(md); err == nil {
			t.Errorf("%s: NewSnapshot accepted bad metadata", name)
		}
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	md := threeHosts()
	s, _ := newSnapshot(md)
	md.Instances[1].ActivePartitions[0].Partition = 2
	md.TopicPartitions["in"] = 1
	r, err := s.Route("counts", []byte("KH01"))
	if err != nil || r.Active.Host != "a" {
		t.Fatalf("snapshot changed with its input: %+v %v", r, err)
	}
}

// model64 is the benchmark model: 64 partitions, 3 hosts, one standby each.
func model64() Metadata {
	md := Metadata{
		StoreSourceTopics: map[string][]string{"counts": {"in"}, "other": {"x"}},
		TopicPartitions:   map[string]int{"in": 64, "x": 64},
	}
	for h := 0; h < 3; h++ {
		in := Instance{HostInfo: HostInfo{fmt.Sprintf("10.0.0.%d", h+1), 7070}, AZ: fmt.Sprintf("az%d", h),
			ActiveStores: []string{"counts"}, StandbyStores: []string{"counts"}, Lags: map[string]map[int]Lag{"counts": {}}}
		for p := 0; p < 64; p++ {
			if p%3 == h {
				in.ActivePartitions = append(in.ActivePartitions, TopicPartition{"in", p})
				in.Lags["counts"][p] = Lag{}
			}
			if (p+1)%3 == h {
				in.StandbyPartitions = append(in.StandbyPartitions, TopicPartition{"in", p})
				in.Lags["counts"][p] = Lag{100, 150, 50, false}
			}
		}
		md.Instances = append(md.Instances, in)
	}
	return md
}

func TestRouteDoesNotAllocate(t *testing.T) {
	s, _ := newSnapshot(model64())
	key := []byte("customer-000042")
	if a := testing.AllocsPerRun(100, func() { _, _ = s.Route("counts", key) }); a != 0 {
		t.Errorf("Route allocates %.1f times", a)
	}
}

var sinkRoute Route

func BenchmarkRoute(b *testing.B) {
	s, err := newSnapshot(model64())
	if err != nil {
		b.Fatal(err)
	}
	key := []byte("customer-000042")
	b.Run("Snapshot.Route/64p-3hosts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkRoute, _ = s.Route("counts", key)
		}
	})
	c, err := NewClient(sourceOf(s), WithAZ("az1"), WithLookupEnv(noEnv))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Client.Route/64p-3hosts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkRoute, _ = c.Route("counts", key)
		}
	})
	c2, _ := NewClient(sourceOf(s), WithAZ("az1"), WithAllowStandby(true), WithLookupEnv(noEnv))
	b.Run("Client.Candidates-standby/64p-3hosts", func(b *testing.B) {
		var buf [4]Replica
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			sinkRoute, _, _ = c2.Candidates(ctx, "counts", key, buf[:0])
		}
	})
}

func noEnv(string) (string, bool) { return "", false }

// TestRouteErrorsStartWithIQ: every error of Route and Candidates starts
// with "iq: store", names the store once, and matches its error value.
func TestRouteErrorsStartWithIQ(t *testing.T) {
	md := threeHosts()
	md.UnmappedStores = map[string]string{"joined": "subtopology 0 reads topics of different partition counts"}
	md.Instances[0].ActivePartitions = nil // partition of a's keys: no active copy
	s, _ := newSnapshot(md)
	c, err := NewClient(sourceOf(s), WithLookupEnv(noEnv), WithAZ(""))
	if err != nil {
		t.Fatal(err)
	}
	var inactive []byte
	for i := 0; inactive == nil; i++ {
		k := []byte(fmt.Sprint("k", i))
		if r, _ := s.Route("counts", k); r.Active == nil {
			inactive = k
		}
	}
	none, _ := NewClient(&Source{impl: &fakeSource{}}, WithLookupEnv(noEnv), WithAZ(""))
	for _, tc := range []struct {
		err  func() error
		want string
		is   error
	}{
		{func() error { _, err := c.Route("nope", nil); return err }, `iq: store "nope": unknown store`, ErrUnknownStore},
		{func() error { _, err := c.Route("joined", nil); return err },
			`iq: store "joined": subtopology 0 reads topics of different partition counts: source topics of the store unknown`, ErrStoreTopicsUnknown},
		{func() error { _, err := c.Route("counts", inactive); return err }, `: no active instance: routing metadata not available`, ErrNotAvailable},
		{func() error { _, err := none.Route("counts", nil); return err }, `iq: store "counts": no metadata loaded yet`, ErrNotAvailable},
		{func() error { _, _, err := c.Candidates(context.Background(), "counts", inactive, nil); return err }, `: no active instance: routing metadata not available`, ErrNotAvailable},
	} {
		err := tc.err()
		if err == nil || !strings.HasPrefix(err.Error(), `iq: store "`) || !strings.Contains(err.Error(), tc.want) ||
			strings.Count(err.Error(), "iq:") != 1 || !errors.Is(err, tc.is) {
			t.Errorf("err = %v; want it to start with iq: store, contain %q, and match %v", err, tc.want, tc.is)
		}
	}
	if !errors.Is(ErrNoReplica, ErrNotAvailable) || errors.Is(ErrNotAvailable, ErrNoReplica) {
		t.Error("ErrNoReplica is not an ErrNotAvailable")
	}
}
