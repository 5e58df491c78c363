package sdk_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// rackRig is a 3-broker embedded cluster whose brokers have racks: kfake
// has no broker.rack, so the bootstrap proxy (in front of broker 0, which
// it advertises in its place) rewrites every Metadata response to give
// broker n the rack racks[n]. Partition p is led by broker p%3.
type rackRig struct {
	c     *embedded.Cluster
	proxy *kproxy.Proxy
	topic string
	parts int
	// rackOf maps a dialed address to its broker's rack.
	rackOf map[string]string
}

var rigRacks = []string{"az-a", "az-b", "az-c"}

func newRackRig(t *testing.T, topic string, parts int) *rackRig {
	t.Helper()
	c := embedded.StartT(t, embedded.Brokers(3), embedded.Topic(topic, parts))
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for i := range parts {
		if err := c.Kfake().MoveTopicPartition(topic, int32(i), int32(i%3)); err != nil {
			t.Fatal(err)
		}
	}
	p.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key != 3 { // Metadata
			return resp
		}
		r, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			t.Errorf("decoding metadata response: %v", err)
			return resp
		}
		mr := r.(*kmsg.MetadataResponse)
		for i := range mr.Brokers {
			rack := rigRacks[mr.Brokers[i].NodeID%3]
			mr.Brokers[i].Rack = &rack
		}
		return kproxy.EncodeResponse(req, mr)
	})
	rig := &rackRig{c: c, proxy: p, topic: topic, parts: parts, rackOf: map[string]string{p.Addr(): rigRacks[0]}}
	// The brokers' own Metadata says which address is which node.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(c.Addrs()[0])}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		rig.rackOf[net.JoinHostPort(b.Host, strconv.Itoa(b.Port))] = rigRacks[b.ID%3]
	}
	return rig
}

// leaderRack returns the rack of partition p's current leader.
func (r *rackRig) leaderRack(p int) string {
	return rigRacks[r.c.Kfake().LeaderFor(r.topic, int32(p))%3]
}

// rackShare is what a run stored: the share of messages in partitions led
// in az-a, and the share of the bytes the Writer wrote to az-a brokers.
type rackShare struct {
	messages, local int
	bytes, localB   int64
}

func (s rackShare) String() string {
	return fmt.Sprintf("messages to az-a leaders %d of %d (%.1f%%), bytes written to az-a brokers %d of %d (%.1f%%)",
		s.local, s.messages, 100*float64(s.local)/float64(s.messages), s.localB, s.bytes, 100*float64(s.localB)/float64(s.bytes))
}

// writeKeyless writes n keyless messages, in calls of 50, with a Writer in
// az-a, and returns what landed where.
func (r *rackRig) writeKeyless(t *testing.T, n int, acks kafka.RequiredAcks, opts ...sdk.Option) rackShare {
	t.Helper()
	before := r.endOffsets(t)
	d := deliverytest.NewRackCounter(r.rackOf)
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(r.proxy.Addr()),
		Topic:        r.topic,
		RequiredAcks: acks,
		BatchTimeout: time.Millisecond, // kafka-go's Writer waits this long for a partition's batch to fill
		Transport:    &kafka.Transport{Dial: d.Dial},
	}, testOptions(t, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs := deliverytest.Messages("rack", n)
	for i := range msgs {
		msgs[i].Key = nil
	}
	for off := 0; off < n; off += 50 {
		if err := w.WriteMessages(ctx, msgs[off:min(off+50, n)]...); err != nil {
			t.Fatalf("WriteMessages: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var s rackShare
	after := r.endOffsets(t)
	for p := range r.parts {
		got := int(after[p] - before[p])
		s.messages += got
		if r.leaderRack(p) == "az-a" {
			s.local += got
		}
	}
	for rack, b := range d.Written() {
		s.bytes += b
		if rack == "az-a" {
			s.localB += b
		}
	}
	if s.messages != n {
		t.Fatalf("stored %d messages, wrote %d", s.messages, n)
	}
	return s
}

func (r *rackRig) endOffsets(t *testing.T) map[int]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return deliverytest.EndOffsets(ctx, t, deliverytest.Topic{Addrs: r.c.Addrs(), Name: r.topic, Partitions: r.parts})
}

// TestWriterRackAwarePartitioning: a Writer in az-a with rack-aware
// partitioning stores every keyless message in a partition led by an az-a
// broker, on the idempotent and the at-least-once path; without it, the
// messages spread over every partition (a third in az-a). The shares are
// logged: they are the figures of docs/RESULTS.md.
func TestWriterRackAwarePartitioning(t *testing.T) {
	t.Parallel()
	const parts, n = 12, 3000
	for _, acks := range []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireOne} {
		t.Run(acks.String(), func(t *testing.T) {
			rig := newRackRig(t, "rack-"+acks.String(), parts)
			off := rig.writeKeyless(t, n, acks)
			on := rig.writeKeyless(t, n, acks, sdk.WithRackAwarePartitioning(true))
			t.Logf("acks=%s, %d keyless messages, 12 partitions led 4 per rack: without the option %v; with it %v", acks, n, off, on)
			if on.local != n {
				t.Fatalf("rack-aware: %d of %d messages in az-a partitions; want all", on.local, n)
			}
			if off.local != n/3 {
				t.Fatalf("without the option: %d of %d messages in az-a partitions; want a third (round robin)", off.local, n)
			}
		})
	}
}

// TestWriterRackAwareFollowsLeaders: when leaders move, keyless messages
// follow the new az-a leaders once the Writer's metadata shows them; keyed
// messages stay where the Hash balancer puts them.
func TestWriterRackAwareFollowsLeaders(t *testing.T) {
	t.Parallel()
	const parts = 6
	rig := newRackRig(t, "rack-moves", parts)
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     &kafka.Hash{},
		Transport:    &kafka.Transport{MetadataTTL: 50 * time.Millisecond},
	}, testOptions(t, sdk.WithRackAwarePartitioning(true))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write := func(key string) {
		t.Helper()
		m := kafka.Message{Value: []byte("v")}
		if key != "" {
			m.Key = []byte(key)
		}
		if err := w.WriteMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	keyed := func() map[int]int64 {
		before := rig.endOffsets(t)
		for i := range 30 {
			write(fmt.Sprintf("k%d", i))
		}
		after := rig.endOffsets(t)
		for p := range after {
			after[p] -= before[p]
		}
		return after
	}
	keyedBefore := keyed()

	// Partitions 0 and 3 are led in az-a. Move 0 to az-b and 1 to az-a.
	if err := rig.c.Kfake().MoveTopicPartition(rig.topic, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := rig.c.Kfake().MoveTopicPartition(rig.topic, 1, 0); err != nil {
		t.Fatal(err)
	}
	// Wait for the event: a keyless message stored in partition 1.
	for {
		before := rig.endOffsets(t)
		write("")
		after := rig.endOffsets(t)
		if after[1] > before[1] {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("keyless messages never reached partition 1 after its leader moved to az-a")
		}
	}
	// From now on only 1 and 3 take keyless messages.
	before := rig.endOffsets(t)
	for range 40 {
		write("")
	}
	after := rig.endOffsets(t)
	for p := range parts {
		got := after[p] - before[p]
		if (p == 1 || p == 3) != (got > 0) {
			t.Fatalf("after the move, partition %d (leader in %s) got %d of 40 keyless messages; want only 1 and 3 (az-a): %v",
				p, rig.leaderRack(p), got, after)
		}
	}
	keyedAfter := keyed()
	for p := range parts {
		if keyedAfter[p] != keyedBefore[p] {
			t.Fatalf("keyed messages moved with the leaders: per partition before %v, after %v", keyedBefore, keyedAfter)
		}
	}
}

// BenchmarkWriterRackAware is a synchronous call of 100 keyless messages
// on the embedded broker (no racks, so every partition stays in use) with
// and without rack-aware partitioning: the difference is the cost of
// reading the leaders' racks before each call.
func BenchmarkWriterRackAware(b *testing.B) {
	c := embedded.StartT(b, embedded.Topic("bench-rack", 6))
	msgs := deliverytest.Messages("bench", 100)
	for i := range msgs {
		msgs[i].Key = nil
	}
	for _, on := range []bool{false, true} {
		b.Run("rack-aware="+strconv.FormatBool(on), func(b *testing.B) {
			w, err := sdk.NewWriter(&kafka.Writer{
				Addr:         kafka.TCP(c.Addrs()...),
				Topic:        "bench-rack",
				RequiredAcks: kafka.RequireAll,
			}, sdk.WithAZ("az-a"), sdk.WithRackAwarePartitioning(on), sdk.WithGetenv(func(string) string { return "" }),
				sdk.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			ctx := context.Background()
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteMessages(ctx, msgs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
