package iq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/joingroup"
	"github.com/segmentio/kafka-go/protocol/syncgroup"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/internal/testkit/embedded"

	"github.com/azkafka/azkafka/iq/internal/wire"
)

// joinAsStreamsMember joins group on the embedded broker with the member
// metadata and assignment bytes of a Kafka Streams member, so that the
// broker holds a Stable Streams group to describe.
func joinAsStreamsMember(t testing.TB, client *kafka.Client, group string, metadata, assignment []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &joingroup.Request{
		GroupID: group, SessionTimeoutMS: 30000, RebalanceTimeoutMS: 30000, ProtocolType: "consumer",
		Protocols: []joingroup.RequestProtocol{{Name: "stream", Metadata: metadata}},
	}
	var jr *joingroup.Response
	for range 3 {
		m, err := client.Transport.RoundTrip(ctx, client.Addr, req)
		if err != nil {
			t.Fatal(err)
		}
		jr = m.(*joingroup.Response)
		if jr.ErrorCode != 79 { // MEMBER_ID_REQUIRED: join again with the ID given
			break
		}
		req.MemberID = jr.MemberID
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("JoinGroup: error code %d", jr.ErrorCode)
	}
	m, err := client.Transport.RoundTrip(ctx, client.Addr, &syncgroup.Request{
		GroupID: group, GenerationID: jr.GenerationID, MemberID: jr.MemberID,
		ProtocolType: "consumer", ProtocolName: "stream", // Kafka Streams' assignor
		Assignments: []syncgroup.RequestAssignment{{MemberID: jr.MemberID, Assignment: assignment}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sr := m.(*syncgroup.Response); sr.ErrorCode != 0 {
		t.Fatalf("SyncGroup: error code %d", sr.ErrorCode)
	}
}

// TestClusterSourceEmbeddedBroker runs the source's kafka-go requests
// (DescribeGroups through the coordinator, Metadata, ListOffsets) against
// the embedded broker holding a Streams member's bytes.
func TestClusterSourceEmbeddedBroker(t *testing.T) {
	app := newStreamsApp()
	var opts []embedded.Option
	for topic, n := range app.topics {
		opts = append(opts, embedded.Topic(topic, n))
	}
	c := embedded.StartT(t, opts...)
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.Addrs()...), Transport: tr}

	s, err := NewClusterSource(c.Addrs(), app.appID, WithTransport(tr), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Refresh(ctx); !errors.Is(err, ErrGroupNotFound) || !strings.Contains(err.Error(), `group "app"`) {
		t.Fatalf("before the group exists: %v", err)
	}

	// Three records in partition 0 of plain's changelog.
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Transport: tr, Balancer: partitionBalancer(0)}
	for i := range 3 {
		if err := w.WriteMessages(ctx, kafka.Message{Topic: "app-plain-changelog", Key: []byte(fmt.Sprint(i)), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	g := app.group()
	joinAsStreamsMember(t, client, app.appID, g.Members[0].MemberMetadata, g.Members[0].MemberAssignment)
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	snap := s.snapshot()
	sawLag := false
	for i := range 100 {
		key := []byte(fmt.Sprint("key-", i))
		r, err := snap.Route("plain", key)
		if err != nil {
			t.Fatal(err)
		}
		task := wire.TaskID{Subtopology: 1, Partition: int32(Partition(key, 6))}
		if r.Active.HostInfo != app.hosts[app.activeOf(task)] || r.Standbys[0].HostInfo != app.hosts[app.standbyOf(task)] {
			t.Fatalf("%s: route %+v, want active %s standby %s", key, r, app.hosts[app.activeOf(task)], app.hosts[app.standbyOf(task)])
		}
		if r.Partition == 0 {
			// The standby of plain-0 reported offset sum 0; the changelog
			// ends at 3.
			if l := r.Standbys[0].Lag; l != (Lag{Current: 0, End: 3, Lag: 3, Bound: true}) {
				t.Fatalf("standby lag of partition 0: %+v", l)
			}
			sawLag = true
		}
	}
	if !sawLag {
		t.Fatal("no key of partition 0 among 100")
	}
	if g := iqinspect.GroupOf(s); g.State != "Stable" || len(g.Members) != 1 || g.Members[0].AZ != "az-a" {
		t.Errorf("group info %+v", g)
	}
}

// TestClusterSourceStreamsProtocolEmbeddedBroker runs the streams-protocol
// path end to end against the embedded broker with SASL/PLAIN:
// FindCoordinator through kafka-go, then the source's own connection,
// authenticated with the transport's mechanism, carrying
// StreamsGroupDescribe, which the broker answers through a control
// function (it does not implement the streams protocol).
func TestClusterSourceStreamsProtocolEmbeddedBroker(t *testing.T) {
	app := newStreamsApp()
	opts := []embedded.Option{embedded.KfakeOptions(kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))}
	for topic, n := range app.topics {
		opts = append(opts, embedded.Topic(topic, n))
	}
	c := embedded.StartT(t, opts...)
	var mu sync.Mutex
	var asked [][]string
	answer := func(fail bool) {
		c.Kfake().ControlKey(int16(kmsg.StreamsGroupDescribe), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			req := kreq.(*kmsg.StreamsGroupDescribeRequest)
			mu.Lock()
			asked = append(asked, req.Groups)
			mu.Unlock()
			if fail {
				return nil, errors.New("unknown API key"), true
			}
			resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
			resp.Groups = []kmsg.StreamsGroupDescribeResponseGroup{*app.streamsGroup()}
			return resp, nil, true
		})
	}
	tr := &kafka.Transport{SASL: plain.Mechanism{Username: "admin", Password: "secret"}, ClientID: "iq-test"}
	defer tr.CloseIdleConnections()
	s, err := NewClusterSource(c.Addrs(), app.appID, WithTransport(tr), WithLogger(quietLogger()),
		WithStoreTopics("leftcount", "left"), WithLookupEnv(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	answer(false)
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if g := iqinspect.GroupOf(s); g.Protocol != "streams" || len(g.Members) != 3 || g.StoreSubtopology["plain"] != "1" {
		t.Fatalf("group %+v", g)
	}
	key := []byte("k1")
	task := wire.TaskID{Subtopology: 1, Partition: int32(Partition(key, 6))}
	if r, err := s.snapshot().Route("plain", key); err != nil || r.Active.HostInfo != app.hosts[app.activeOf(task)] {
		t.Fatalf("route %+v, %v; want active %s", r, err, app.hosts[app.activeOf(task)])
	}

	// A broker that closes the connection on the request does not know it.
	answer(true)
	err = s.Refresh(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not support the streams rebalance protocol") || !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("refused: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || !slices.Equal(asked[0], []string{app.appID}) {
		t.Errorf("asked for %v", asked)
	}
}

type partitionBalancer int

func (p partitionBalancer) Balance(kafka.Message, ...int) int { return int(p) }

// BenchmarkClusterSourcePoll times one poll (DescribeGroups, Metadata,
// ListOffsets, decoding and indexing) against the embedded broker holding a
// Streams member of the three-instance layout.
func BenchmarkClusterSourcePoll(b *testing.B) {
	app := newStreamsApp()
	var opts []embedded.Option
	for topic, n := range app.topics {
		opts = append(opts, embedded.Topic(topic, n))
	}
	c := embedded.StartT(b, opts...)
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.Addrs()...), Transport: tr}
	g := app.group()
	joinAsStreamsMember(b, client, app.appID, g.Members[0].MemberMetadata, g.Members[0].MemberAssignment)
	s, err := NewClusterSource(c.Addrs(), app.appID, WithTransport(tr), WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
