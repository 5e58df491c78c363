package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/azdetect"
)

func zoneMember(t testing.TB, id, zone string, topics ...string) kafka.GroupMember {
	ud, err := ZoneAffinityGroupBalancer{Zone: zone}.UserData()
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) == 0 {
		topics = []string{"t"}
	}
	return kafka.GroupMember{ID: id, Topics: topics, UserData: ud}
}

// partitionsLedIn returns partitions 0..len(racks)-1 of topic, partition
// p led by a broker in racks[p].
func partitionsLedIn(topic string, racks ...string) []kafka.Partition {
	out := make([]kafka.Partition, len(racks))
	for p, r := range racks {
		out[p] = kafka.Partition{Topic: topic, ID: p, Leader: kafka.Broker{ID: p, Rack: r}}
	}
	return out
}

func TestZoneAffinityGroupBalancer(t *testing.T) {
	abc := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = []string{"az-a", "az-b", "az-c"}[i%3]
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		members [][2]string // id, zone
		racks   []string
		want    map[string][]int
	}{
		{"one per zone", [][2]string{{"m1", "az-a"}, {"m2", "az-b"}, {"m3", "az-c"}}, abc(6),
			map[string][]int{"m1": {0, 3}, "m2": {1, 4}, "m3": {2, 5}}},
		{"members listed in another order", [][2]string{{"m3", "az-c"}, {"m1", "az-a"}, {"m2", "az-b"}}, abc(6),
			map[string][]int{"m1": {0, 3}, "m2": {1, 4}, "m3": {2, 5}}},
		{"two zones, three racks", [][2]string{{"m1", "az-a"}, {"m2", "az-b"}}, abc(6),
			nil}, // checked by the invariants only: 0,3 on m1 and 1,4 on m2
		{"no zones: fair share", [][2]string{{"m1", ""}, {"m2", ""}, {"m3", ""}}, abc(7), nil},
		{"all led in one zone", [][2]string{{"m1", "az-a"}, {"m2", "az-b"}}, []string{"az-a", "az-a", "az-a", "az-a"}, nil},
		{"more members than partitions", [][2]string{{"m1", "az-a"}, {"m2", "az-b"}, {"m3", "az-c"}, {"m4", "az-a"}}, abc(2), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var members []kafka.GroupMember
			for _, m := range tc.members {
				members = append(members, zoneMember(t, m[0], m[1]))
			}
			parts := partitionsLedIn("t", tc.racks...)
			got := ZoneAffinityGroupBalancer{}.AssignGroups(members, parts)
			checkZoneAssignment(t, members, parts, got)
			if tc.want != nil {
				for id, want := range tc.want {
					if g := got[id]["t"]; !slices.Equal(g, want) {
						t.Errorf("member %s got %v, want %v (all: %v)", id, g, want, got)
					}
				}
			}
		})
	}
	t.Run("two zones keep their local partitions", func(t *testing.T) {
		members := []kafka.GroupMember{zoneMember(t, "m1", "az-a"), zoneMember(t, "m2", "az-b")}
		got := ZoneAffinityGroupBalancer{}.AssignGroups(members, partitionsLedIn("t", abc(6)...))
		for _, c := range []struct {
			id string
			ps []int
		}{{"m1", []int{0, 3}}, {"m2", []int{1, 4}}} {
			for _, p := range c.ps {
				if !slices.Contains(got[c.id]["t"], p) {
					t.Errorf("%s lacks its local partition %d: %v", c.id, p, got)
				}
			}
		}
	})
}

// checkZoneAssignment checks the invariants of any assignment: every
// partition of a subscribed topic once, to a member subscribed to it;
// balanced within ±1 per topic; every zone's local partitions kept in
// zone when the zone's members have room for them at the lower quota.
func checkZoneAssignment(t testing.TB, members []kafka.GroupMember, parts []kafka.Partition, got kafka.GroupMemberAssignments) {
	t.Helper()
	byTopic := map[string][]kafka.GroupMember{}
	for _, m := range members {
		for _, tp := range m.Topics {
			byTopic[tp] = append(byTopic[tp], m)
		}
	}
	for topic, ms := range byTopic {
		var ps []kafka.Partition
		for _, p := range parts {
			if p.Topic == topic {
				ps = append(ps, p)
			}
		}
		owner := map[int]string{}
		lo, hi := len(ps)/len(ms), (len(ps)+len(ms)-1)/len(ms)
		zoneOf := map[string]string{}
		for _, m := range ms {
			zoneOf[m.ID], _ = decodeZoneUserData(m.UserData)
			n := len(got[m.ID][topic])
			if n < lo || n > hi {
				t.Fatalf("topic %s: member %s has %d partitions, want %d..%d: %v", topic, m.ID, n, lo, hi, got)
			}
			for _, p := range got[m.ID][topic] {
				if o, dup := owner[p]; dup {
					t.Fatalf("topic %s partition %d assigned to %s and %s", topic, p, o, m.ID)
				}
				owner[p] = m.ID
			}
		}
		if len(owner) != len(ps) {
			t.Fatalf("topic %s: %d of %d partitions assigned: %v", topic, len(owner), len(ps), got)
		}
		zoneMembers, zoneParts := map[string]int{}, map[string]int{}
		for _, m := range ms {
			if zoneOf[m.ID] != "" {
				zoneMembers[zoneOf[m.ID]]++
			}
		}
		for _, p := range ps {
			zoneParts[p.Leader.Rack]++
		}
		for z, n := range zoneMembers {
			if zoneParts[z] > n*lo {
				continue // the zone cannot take all of its partitions
			}
			for _, p := range ps {
				if p.Leader.Rack == z && zoneOf[owner[p.ID]] != z {
					t.Fatalf("topic %s: partition %d led in %s went to %s (zone %q) though %s's %d members had room for its %d partitions: %v",
						topic, p.ID, z, owner[p.ID], zoneOf[owner[p.ID]], z, n, zoneParts[z], got)
				}
			}
		}
	}
}

// TestZoneAffinityGroupBalancerProperties runs random groups: the
// invariants hold, the result does not depend on the order of members or
// partitions, and a member joining moves few partitions.
func TestZoneAffinityGroupBalancerProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []string{"az-a", "az-b", "az-c", ""}
	var moved, total int
	for run := range 500 {
		nm, np := 1+rng.IntN(8), rng.IntN(40)
		var members []kafka.GroupMember
		for i := range nm {
			topics := []string{"t"}
			if rng.IntN(3) == 0 {
				topics = append(topics, "u")
			}
			members = append(members, zoneMember(t, fmt.Sprintf("member-%d-%d", run, i), zones[rng.IntN(len(zones))], topics...))
		}
		var parts []kafka.Partition
		for _, topic := range []string{"t", "u"} {
			for p := range np {
				parts = append(parts, kafka.Partition{Topic: topic, ID: p, Leader: kafka.Broker{Rack: zones[rng.IntN(3)]}})
			}
		}
		got := ZoneAffinityGroupBalancer{}.AssignGroups(members, parts)
		checkZoneAssignment(t, members, parts, got)

		shuffledM, shuffledP := slices.Clone(members), slices.Clone(parts)
		rng.Shuffle(len(shuffledM), func(i, j int) { shuffledM[i], shuffledM[j] = shuffledM[j], shuffledM[i] })
		rng.Shuffle(len(shuffledP), func(i, j int) { shuffledP[i], shuffledP[j] = shuffledP[j], shuffledP[i] })
		again := ZoneAffinityGroupBalancer{}.AssignGroups(shuffledM, shuffledP)
		if !maps.EqualFunc(got, again, func(a, b map[string][]int) bool {
			return maps.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
		}) {
			t.Fatalf("run %d: order changed the assignment:\n%v\n%v", run, got, again)
		}

		// One more member: count the partitions of "t" that changed owner
		// among the members that stayed.
		joined := append(slices.Clone(members), zoneMember(t, fmt.Sprintf("member-%d-new", run), zones[rng.IntN(len(zones))]))
		after := ZoneAffinityGroupBalancer{}.AssignGroups(joined, parts)
		checkZoneAssignment(t, joined, parts, after)
		ownerBefore := map[int]string{}
		for id, a := range got {
			for _, p := range a["t"] {
				ownerBefore[p] = id
			}
		}
		for id, a := range after {
			for _, p := range a["t"] {
				if ownerBefore[p] != id {
					moved++
				}
			}
		}
		total += np
	}
	t.Logf("a member joining moved %d of %d partitions (%.1f%%)", moved, total, 100*float64(moved)/float64(total))
	// The seed is fixed, so this is one measured figure (37.2%), kept from
	// growing: a join must leave most partitions where they were.
	if 2*moved >= total {
		t.Fatalf("a member joining moved %d of %d partitions; want fewer than half", moved, total)
	}
}

func TestZoneUserData(t *testing.T) {
	for _, zone := range []string{"", "az-a", "use1-az1"} {
		b, err := encodeZoneUserData(zone)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeZoneUserData(b)
		if err != nil || got != zone {
			t.Errorf("round trip of %q: %q, %v", zone, got, err)
		}
	}
	if _, err := (ZoneAffinityGroupBalancer{Zone: string(make([]byte, 300))}).UserData(); err == nil {
		t.Error("a 300-byte zone encoded without error")
	}
	for _, b := range [][]byte{nil, {0}, {1}, {1, 0}, {1, 0, 5, 'a'}} {
		if z, err := decodeZoneUserData(b); err == nil {
			t.Errorf("decode %v = %q, want an error", b, z)
		}
	}
}

func FuzzDecodeZoneUserData(f *testing.F) {
	f.Add([]byte{1, 0, 4, 'a', 'z', '-', 'a'})
	f.Add([]byte{2, 0, 0, 9, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		z, err := decodeZoneUserData(b)
		if err != nil {
			return
		}
		enc, err := encodeZoneUserData(z)
		if err != nil {
			t.Fatalf("decoded zone %q does not encode: %v", z, err)
		}
		if len(b) < len(enc) || string(b[3:len(enc)]) != z {
			t.Fatalf("decoded %q from %v", z, b)
		}
	})
}

func BenchmarkZoneAffinityAssign(b *testing.B) {
	var members []kafka.GroupMember
	for i := range 12 {
		members = append(members, zoneMember(b, fmt.Sprintf("member-%02d", i), []string{"az-a", "az-b", "az-c"}[i%3]))
	}
	parts := partitionsLedIn("t", slices.Repeat([]string{"az-a", "az-b", "az-c"}, 40)...)
	b.ReportAllocs()
	for b.Loop() {
		ZoneAffinityGroupBalancer{}.AssignGroups(members, parts)
	}
}

// TestWithZone: an empty Zone, in a value, a pointer or a nil pointer,
// becomes the Reader's zone; a set Zone and other balancers stay; the
// caller's slice and balancers are not written.
func TestWithZone(t *testing.T) {
	set := &ZoneAffinityGroupBalancer{Zone: "az-b"}
	empty := &ZoneAffinityGroupBalancer{}
	in := []kafka.GroupBalancer{ZoneAffinityGroupBalancer{}, empty, (*ZoneAffinityGroupBalancer)(nil), set,
		ZoneAffinityGroupBalancer{Zone: "az-c"}, kafka.RangeGroupBalancer{}}
	orig := slices.Clone(in)
	got := withZone(in, "az-a")
	want := []kafka.GroupBalancer{ZoneAffinityGroupBalancer{Zone: "az-a"}, ZoneAffinityGroupBalancer{Zone: "az-a"}, ZoneAffinityGroupBalancer{Zone: "az-a"}, set,
		ZoneAffinityGroupBalancer{Zone: "az-c"}, kafka.RangeGroupBalancer{}}
	if !slices.Equal(got, want) {
		t.Errorf("withZone = %#v\nwant %#v", got, want)
	}
	if !slices.Equal(in, orig) || empty.Zone != "" || set.Zone != "az-b" {
		t.Errorf("the caller's balancers changed: %#v, empty %+v, set %+v", in, empty, set)
	}
	// Nothing to fill: the same slice back.
	for _, bs := range [][]kafka.GroupBalancer{nil, {kafka.RangeGroupBalancer{}, set}} {
		if got := withZone(bs, "az-a"); len(got) != len(bs) || len(bs) > 0 && &got[0] != &bs[0] {
			t.Errorf("withZone(%v) copied or changed it: %v", bs, got)
		}
	}
	// Zone unknown: empty stays empty.
	if got := withZone(orig, ""); !slices.Equal(got, orig) {
		t.Errorf("withZone(unknown zone) = %#v", got)
	}
}

// TestNewZoneAffinityGroupBalancer: the zone is resolved as for every
// client: the option, else the environment, else detection; unknown is
// not an error; invalid configuration is, naming the variable.
func TestNewZoneAffinityGroupBalancer(t *testing.T) {
	detected := WithDetector(func(context.Context) (azdetect.Result, error) {
		return azdetect.Result{AZ: "eu-west-1b", Source: "ec2"}, nil
	})
	failing := WithDetector(func(context.Context) (azdetect.Result, error) {
		return azdetect.Result{}, azdetect.ErrNoAZ
	})
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		name    string
		opts    []Option
		want    string
		wantErr string
	}{
		{"option", []Option{env(map[string]string{EnvAZ: "us-east-1c"}), noDetect(t), WithAZ("us-east-1a")}, "us-east-1a", ""},
		{"environment", []Option{env(map[string]string{EnvAZ: "us-east-1c"}), noDetect(t)}, "us-east-1c", ""},
		{"detected", []Option{env(nil), detected}, "eu-west-1b", ""},
		{"unknown", []Option{env(nil), failing, quiet}, "", ""},
		{"invalid", []Option{env(map[string]string{EnvAZ: "a,b"}), noDetect(t)}, "", `AZKAFKA_AZ="a,b"`},
	} {
		b, err := NewZoneAffinityGroupBalancer(tc.opts...)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case b.Zone != tc.want:
			t.Errorf("%s: Zone %q, want %q", tc.name, b.Zone, tc.want)
		}
	}
}
