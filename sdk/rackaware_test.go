package sdk

import (
	"fmt"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataWithRacks is a Metadata response of one topic whose partition p
// is led by broker leaders[p]; broker n's rack is racks[n].
func metadataWithRacks(topic string, racks []string, leaders []int32) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	for n, rack := range racks {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(n), "127.0.0.1", int32(9092+n)
		if rack != "" {
			b.Rack = kmsg.StringPtr(rack)
		}
		r.Brokers = append(r.Brokers, b)
	}
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(topic)
	for p, l := range leaders {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition, rp.Leader = int32(p), l
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestRackAwareBalancer: keyless messages go only to partitions led in
// the client's AZ, spread by the inner balancer as it would spread them;
// no local leader, no racks or no AZ → every partition; keyed messages
// land where the inner balancer alone puts them.
func TestRackAwareBalancer(t *testing.T) {
	racks := []string{"az-a", "az-b", "az-c"}
	for _, tc := range []struct {
		name    string
		az      string
		racks   []string
		leaders []int32
		parts   []int // what the Writer passes; nil: 0..len(leaders)-1
		want    []int // the partitions keyless messages may use, each equally often
	}{
		{"leaders spread", "az-a", racks, []int32{0, 1, 2, 0, 1, 2}, nil, []int{0, 3}},
		{"other zone", "az-b", racks, []int32{0, 1, 2, 0, 1, 2}, nil, []int{1, 4}},
		{"all local", "az-a", racks, []int32{0, 0, 0}, nil, []int{0, 1, 2}},
		{"no local leader", "az-c", racks, []int32{0, 1, 0, 1}, nil, []int{0, 1, 2, 3}},
		{"unknown AZ", "", racks, []int32{0, 1, 2}, nil, []int{0, 1, 2}},
		{"brokers without racks", "az-a", []string{"", "", ""}, []int32{0, 1, 2}, nil, []int{0, 1, 2}},
		{"leaderless partition", "az-a", racks, []int32{0, -1, 2, 0}, nil, []int{0, 3}},
		{"subset passed", "az-a", racks, []int32{0, 1, 2, 0, 1, 2}, []int{1, 2, 3}, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRackAwareBalancer(&kafka.RoundRobin{}, "events", tc.az)
			b.view.Store(newRackView(metadataWithRacks("events", tc.racks, tc.leaders), tc.az))
			parts := tc.parts
			if parts == nil {
				parts = identity(len(tc.leaders))
			}
			before := slices.Clone(parts)
			counts := map[int]int{}
			rounds := 12 * len(tc.want)
			for range rounds {
				counts[b.Balance(kafka.Message{Value: []byte("v")}, parts...)]++
			}
			if !slices.Equal(parts, before) {
				t.Fatalf("Balance modified its input: %v, was %v", parts, before)
			}
			for p, n := range counts {
				if !slices.Contains(tc.want, p) {
					t.Fatalf("keyless message sent to partition %d; want one of %v (counts %v)", p, tc.want, counts)
				}
				if n != rounds/len(tc.want) {
					t.Fatalf("partition %d got %d of %d messages; want %d each over %v (round robin)", p, n, rounds, rounds/len(tc.want), tc.want)
				}
			}
			if len(counts) != len(tc.want) {
				t.Fatalf("used partitions %v; want all of %v", counts, tc.want)
			}
			// Keyed messages: exactly where the user's balancer puts them.
			for i := range 200 {
				m := kafka.Message{Key: fmt.Appendf(nil, "key-%d", i)}
				want := (&kafka.Hash{}).Balance(m, parts...)
				kb := newRackAwareBalancer(&kafka.Hash{}, "events", tc.az)
				kb.view.Store(b.view.Load())
				if got := kb.Balance(m, parts...); got != want {
					t.Fatalf("key %q: partition %d, want %d (keyed messages never move)", m.Key, got, want)
				}
			}
		})
	}
}

// TestRackAwareBalancerTopics: the view is per topic; a message naming
// another topic than the Writer's uses that topic's leaders, and a topic
// missing from the view gets every partition.
func TestRackAwareBalancerTopics(t *testing.T) {
	racks := []string{"az-a", "az-b"}
	r := metadataWithRacks("a", racks, []int32{1, 0, 1})
	r.Topics = append(r.Topics, metadataWithRacks("b", racks, []int32{1, 1, 0}).Topics...)
	b := newRackAwareBalancer(&kafka.RoundRobin{}, "a", "az-a")
	b.view.Store(newRackView(r, "az-a"))
	for _, tc := range []struct {
		topic string
		want  int
	}{{"", 1}, {"a", 1}, {"b", 2}} {
		if got := b.Balance(kafka.Message{Topic: tc.topic}, 0, 1, 2); got != tc.want {
			t.Errorf("topic %q: partition %d, want %d", tc.topic, got, tc.want)
		}
	}
	seen := map[int]bool{}
	for range 3 {
		seen[b.Balance(kafka.Message{Topic: "c"}, 0, 1, 2)] = true
	}
	if len(seen) != 3 {
		t.Errorf("topic without metadata used partitions %v; want all 3", seen)
	}
}

func TestKeylessTopics(t *testing.T) {
	for _, tc := range []struct {
		msgs []kafka.Message
		want []string
	}{
		{[]kafka.Message{{Key: []byte("k")}}, nil},
		{[]kafka.Message{{}, {}, {Key: []byte("k"), Topic: "x"}}, []string{"w"}},
		{[]kafka.Message{{Topic: "x"}, {}, {Topic: "x"}, {Topic: "y"}}, []string{"x", "w", "y"}},
	} {
		if got := keylessTopics(tc.msgs, "w"); !slices.Equal(got, tc.want) {
			t.Errorf("keylessTopics = %v, want %v", got, tc.want)
		}
	}
}

// BenchmarkRackAwareBalance is the per-message cost of the partition
// choice for a keyless message, 12 partitions, next to the inner balancer
// alone.
func BenchmarkRackAwareBalance(b *testing.B) {
	parts := identity(12)
	leaders := []int32{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}
	msg := kafka.Message{Value: []byte("v")}
	b.Run("round-robin", func(b *testing.B) {
		rr := &kafka.RoundRobin{}
		b.ReportAllocs()
		for b.Loop() {
			rr.Balance(msg, parts...)
		}
	})
	b.Run("rack-aware", func(b *testing.B) {
		rb := newRackAwareBalancer(&kafka.RoundRobin{}, "events", "az-a")
		rb.view.Store(newRackView(metadataWithRacks("events", []string{"az-a", "az-b", "az-c"}, leaders), "az-a"))
		b.ReportAllocs()
		for b.Loop() {
			rb.Balance(msg, parts...)
		}
	})
	b.Run("rack-aware-view", func(b *testing.B) {
		resp := metadataWithRacks("events", []string{"az-a", "az-b", "az-c"}, leaders)
		b.ReportAllocs()
		for b.Loop() {
			newRackView(resp, "az-a")
		}
	})
}
