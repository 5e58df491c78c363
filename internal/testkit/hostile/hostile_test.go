package hostile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func start(t *testing.T, c Case, opts ...Option) *Server {
	t.Helper()
	s, err := Start(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	return c
}

// request encodes req as a size-prefixed frame with client ID "raw".
func request(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, corr)
}

func send(t *testing.T, c net.Conn, frames ...[]byte) {
	t.Helper()
	if _, err := c.Write(slices.Concat(frames...)); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one response frame and returns it with its size prefix.
func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading size: %v", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<20 {
		t.Fatalf("response size %d", n)
	}
	b := make([]byte, 4+n)
	copy(b, size[:])
	if _, err := io.ReadFull(c, b[4:]); err != nil {
		t.Fatalf("reading %d-byte frame: %v", n, err)
	}
	return b
}

// readFor reads until the server closes or d passes; closed reports which.
func readFor(c net.Conn, d time.Duration) (got []byte, closed bool) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(c)
	var ne net.Error
	return got, !(errors.As(err, &ne) && ne.Timeout())
}

// decode decodes a frame (size prefix included) as the response to key at
// version, through kproxy's reader of response headers.
func decode(t *testing.T, frame []byte, key, version int16) (int32, kmsg.Response) {
	t.Helper()
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	resp, err := kproxy.DecodeResponse(kproxy.Request{Key: key, Version: version, CorrelationID: corr}, frame[4:])
	if err != nil {
		t.Fatalf("key %d v%d: %v", key, version, err)
	}
	return corr, resp
}

func roundTrip[R kmsg.Response](t *testing.T, s *Server, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := kproxy.RoundTrip(ctx, s.Addr(), "raw", req)
	if err != nil {
		t.Fatalf("key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	return resp.(R)
}

func TestKgoProduces(t *testing.T) {
	s := start(t, None)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	for want := range int64(2) {
		rec, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).First()
		if err != nil {
			t.Fatal(err)
		}
		if rec.Partition != 0 || rec.Offset != want {
			t.Errorf("record at partition %d offset %d, want 0, %d", rec.Partition, rec.Offset, want)
		}
	}
}

func TestKafkaGoClientMetadata(t *testing.T) {
	s := start(t, None)
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(s.Addr()), Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// kafka-go's Transport answers from its cache, filled by a request for
	// all topics, which lists only the topic "hostile".
	resp, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"hostile"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].ID != 1 || resp.Brokers[0].Rack != "az1" ||
		net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(resp.Brokers[0].Port)) != s.Addr() {
		t.Errorf("brokers %+v, want node 1 at %s in az1", resp.Brokers, s.Addr())
	}
	if resp.Controller.ID != 1 {
		t.Errorf("controller %d", resp.Controller.ID)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Name != "hostile" || resp.Topics[0].Error != nil ||
		len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Leader.ID != 1 {
		t.Errorf("topics %+v", resp.Topics)
	}
}

func TestKafkaGoWriterWrites(t *testing.T) {
	// The Transport learns topics from a request for all topics ("hostile"
	// only) unless MetadataTopics names them.
	for _, tc := range []struct {
		topic string
		tr    *kafka.Transport
	}{
		{"hostile", &kafka.Transport{}},
		{"t", &kafka.Transport{MetadataTopics: []string{"t"}}},
	} {
		s := start(t, None)
		w := &kafka.Writer{
			Addr:         kafka.TCP(s.Addr()),
			Topic:        tc.topic,
			RequiredAcks: kafka.RequireOne,
			BatchTimeout: time.Millisecond,
			Transport:    tc.tr,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("v")}); err != nil {
			t.Errorf("topic %s: %v", tc.topic, err)
		}
		cancel()
		if err := w.Close(); err != nil {
			t.Error(err)
		}
		tc.tr.CloseIdleConnections()
		if !slices.ContainsFunc(s.Requests(), func(r Request) bool { return r.Key == keyProduce }) {
			t.Errorf("topic %s: no Produce among %+v", tc.topic, s.Requests())
		}
	}
}

func TestKgoGroupConsumerReachesFetch(t *testing.T) {
	s := start(t, None)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetched := func() bool {
		return slices.ContainsFunc(s.Requests(), func(r Request) bool { return r.Key == keyFetch })
	}
	deadline := time.Now().Add(4 * time.Second)
	for !fetched() && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if errs := cl.PollFetches(ctx).Errors(); len(errs) > 0 && !errors.Is(errs[0].Err, context.DeadlineExceeded) {
			t.Fatalf("poll: %v", errs)
		}
		cancel()
	}
	var keys []int16
	for _, r := range s.Requests() {
		keys = append(keys, r.Key)
	}
	for _, want := range []int16{keyFindCoordinator, keyJoinGroup, keySyncGroup, keyOffsetFetch, keyFetch} {
		if !slices.Contains(keys, want) {
			t.Errorf("no request with key %d among %v", want, keys)
		}
	}
}

func TestKafkaGoReaderReachesFetch(t *testing.T) {
	s := start(t, None)
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{s.Addr()}, Topic: "hostile", MaxWait: 50 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.ReadMessage(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadMessage: %v, want the context's deadline (no records)", err)
	}
	if !slices.ContainsFunc(s.Requests(), func(r Request) bool { return r.Key == keyFetch }) {
		t.Errorf("no Fetch among %+v", s.Requests())
	}
}

// TestFirstBytes sends ApiVersions v0 to each case and checks what comes
// back first.
func TestFirstBytes(t *testing.T) {
	const corr = 7
	apiVersions := request(&kmsg.ApiVersionsRequest{Version: 0}, corr)
	benign := func(t *testing.T, c net.Conn) {
		_, resp := decode(t, readFrame(t, c), keyAPIVersions, 0)
		if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) != len(served) {
			t.Errorf("ApiVersions: error %d, %d keys", r.ErrorCode, len(r.ApiKeys))
		}
	}
	exactly := func(want []byte) func(*testing.T, net.Conn) {
		return func(t *testing.T, c net.Conn) {
			got, closed := readFor(c, 2*time.Second)
			if !bytes.Equal(got, want) || !closed {
				t.Errorf("got %x (closed %v), want %x then close", got, closed, want)
			}
		}
	}
	checks := map[Case]func(*testing.T, net.Conn){
		None:               benign,
		HeaderTagsBomb:     benign, // ApiVersions has no header tags
		MetadataBomb:       benign,
		InitProducerIDBomb: benign,
		ProduceBomb:        benign,
		FetchBomb:          benign,
		DescribeGroupsBomb: benign,
		PlaintextForTLS:    benign,
		NegativeSize:       exactly([]byte{0xFF, 0xFF, 0xFF, 0xF0}),
		TLSAlert:           exactly([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32}),
		HTTP400: func(t *testing.T, c net.Conn) {
			got, closed := readFor(c, 2*time.Second)
			head := "HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nContent-Type: text/html\r\nContent-Length: 157\r\nConnection: close\r\n\r\n<html>"
			if !bytes.HasPrefix(got, []byte(head)) || len(got) != len(head)-len("<html>")+157 || !closed {
				t.Errorf("got %q (closed %v)", got, closed)
			}
		},
		HugeSize: func(t *testing.T, c net.Conn) {
			got, closed := readFor(c, 100*time.Millisecond)
			// size, correlation ID, error_code 0, start of the api_keys count
			want := []byte{0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, corr, 0, 0, 0, 0}
			if !bytes.Equal(got, want) || closed {
				t.Errorf("got %x (closed %v), want %x and an open connection", got, closed, want)
			}
		},
		WrongCorrelation: func(t *testing.T, c net.Conn) {
			if got, _ := decode(t, readFrame(t, c), keyAPIVersions, 0); got != corr+1 {
				t.Errorf("correlation ID %d, want %d", got, corr+1)
			}
		},
		RandomBody: func(t *testing.T, c net.Conn) {
			got := readFrame(t, c)
			if !bytes.HasPrefix(got, []byte{0, 0, 4, 4, 0, 0, 0, corr}) || len(got) != 1032 || !bytes.Equal(got, randomBody(corr)) {
				t.Errorf("got %d bytes starting %x", len(got), got[:8])
			}
		},
		ApiVersionsBomb: exactlyOpen([]byte{0, 0, 0, 10, 0, 0, 0, corr, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF}),
		Silent: func(t *testing.T, c net.Conn) {
			if got, closed := readFor(c, 100*time.Millisecond); len(got) != 0 || closed {
				t.Errorf("got %x (closed %v), want silence", got, closed)
			}
		},
	}
	for _, cs := range append([]Case{None}, Cases()...) {
		t.Run(string(cs), func(t *testing.T) {
			t.Parallel()
			check, ok := checks[cs]
			if !ok {
				t.Fatal("no check for this case")
			}
			s := start(t, cs)
			c := dial(t, s)
			send(t, c, apiVersions)
			check(t, c)
			if cs != HTTP400 && cs != TLSAlert {
				want := []Request{{Key: keyAPIVersions, Version: 0, CorrelationID: corr, ClientID: "raw"}}
				if got := s.Requests(); !slices.Equal(got, want) {
					t.Errorf("Requests() = %+v, want %+v", got, want)
				}
			}
		})
	}
}

func exactlyOpen(want []byte) func(*testing.T, net.Conn) {
	return func(t *testing.T, c net.Conn) {
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
			t.Errorf("got %x (%v), want %x", got, err, want)
		}
	}
}

func TestAtAndOncePerConnection(t *testing.T) {
	s := start(t, WrongCorrelation, At(keyMetadata))
	for range 2 { // every connection misbehaves afresh
		c := dial(t, s)
		send(t, c,
			request(&kmsg.ApiVersionsRequest{Version: 3}, 1),
			request(&kmsg.MetadataRequest{Version: 12}, 2),
			request(&kmsg.MetadataRequest{Version: 12}, 3))
		for _, want := range []struct {
			key  int16
			v    int16
			corr int32
		}{{keyAPIVersions, 3, 1}, {keyMetadata, 12, 3}, {keyMetadata, 12, 3}} {
			if got, _ := decode(t, readFrame(t, c), want.key, want.v); got != want.corr {
				t.Errorf("key %d: correlation ID %d, want %d", want.key, got, want.corr)
			}
		}
	}
}

func TestNegativeSizeOnEveryConnection(t *testing.T) {
	s := start(t, NegativeSize)
	for range 2 {
		c := dial(t, s)
		send(t, c, request(&kmsg.MetadataRequest{Version: 1}, 1))
		if got, closed := readFor(c, 2*time.Second); !bytes.Equal(got, negativeSize) || !closed {
			t.Errorf("got %x (closed %v)", got, closed)
		}
	}
}

func TestHeaderTagsBombHitsFirstFlexibleResponse(t *testing.T) {
	s := start(t, HeaderTagsBomb)
	c := dial(t, s)
	send(t, c,
		request(&kmsg.ApiVersionsRequest{Version: 3}, 1), // flexible body, plain header
		request(&kmsg.MetadataRequest{Version: 8}, 2),    // not flexible
		request(&kmsg.MetadataRequest{Version: 9}, 3),
		request(&kmsg.MetadataRequest{Version: 9}, 4))
	decode(t, readFrame(t, c), keyAPIVersions, 3)
	decode(t, readFrame(t, c), keyMetadata, 8)
	want := []byte{0, 0, 0, 15, 0, 0, 0, 3, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}
	if got := readFrame(t, c); !bytes.Equal(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	decode(t, readFrame(t, c), keyMetadata, 9) // the connection is still in sync
}

func TestBombsAtTheirTarget(t *testing.T) {
	for _, tc := range []struct {
		c   Case
		req kmsg.Request
	}{
		{ApiVersionsBomb, &kmsg.ApiVersionsRequest{Version: 3}},
		{MetadataBomb, &kmsg.MetadataRequest{Version: 12}},
		{MetadataBomb, &kmsg.MetadataRequest{Version: 0}},
		{InitProducerIDBomb, &kmsg.InitProducerIDRequest{Version: 5}},
		{InitProducerIDBomb, &kmsg.InitProducerIDRequest{Version: 1}},
		{ProduceBomb, &kmsg.ProduceRequest{Version: 11, Acks: -1}},
		{FetchBomb, &kmsg.FetchRequest{Version: 16}},
		{DescribeGroupsBomb, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}}},
	} {
		s := start(t, tc.c)
		c := dial(t, s)
		if tc.req.Key() != keyAPIVersions {
			send(t, c, request(&kmsg.ApiVersionsRequest{Version: 0}, 1))
			decode(t, readFrame(t, c), keyAPIVersions, 0)
		}
		send(t, c, request(tc.req, 2))
		want := bombResponse(tc.c, tc.req.Key(), tc.req.GetVersion(), 2, s.host, s.port)
		if got := readFrame(t, c); want == nil || !bytes.Equal(got, want) {
			t.Errorf("%s v%d: got %x, want %x", tc.c, tc.req.GetVersion(), got, want)
		}
	}
}

func TestPipelinedResponsesInOrder(t *testing.T) {
	s := start(t, None)
	c := dial(t, s)
	fetch := &kmsg.FetchRequest{Version: 11, MaxWaitMillis: 50, MinBytes: 1, Topics: []kmsg.FetchRequestTopic{
		{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}},
	}}
	acks0 := &kmsg.ProduceRequest{Version: 7, Acks: 0, Topics: []kmsg.ProduceRequestTopic{
		{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch(1)}}},
	}}
	begin := time.Now()
	send(t, c,
		request(&kmsg.ApiVersionsRequest{Version: 3}, 1),
		request(fetch, 2),
		request(&kmsg.HeartbeatRequest{Version: 4, Group: "g"}, 3),
		request(acks0, 4), // no response
		request(&kmsg.MetadataRequest{Version: 9}, 5))
	for _, want := range []struct {
		key, v int16
		corr   int32
	}{{keyAPIVersions, 3, 1}, {keyFetch, 11, 2}, {keyHeartbeat, 4, 3}, {keyMetadata, 9, 5}} {
		got, _ := decode(t, readFrame(t, c), want.key, want.v)
		if got != want.corr {
			t.Fatalf("correlation ID %d, want %d", got, want.corr)
		}
		if want.key == keyFetch && time.Since(begin) < 50*time.Millisecond {
			t.Errorf("empty fetch answered after %v, before its 50 ms wait", time.Since(begin))
		}
	}
}

// batch returns a v2 record batch holding n records, as far as its header
// goes (the server counts, it does not read records).
func batch(n int32) []byte {
	b := kmsg.RecordBatch{Magic: 2, NumRecords: n, LastOffsetDelta: n - 1}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	return b.AppendTo(nil)
}

func TestProduceOffsetsCountRecords(t *testing.T) {
	s := start(t, None)
	produce := func(version int16, topic string, records []byte) int64 {
		req := &kmsg.ProduceRequest{Version: version, Acks: -1, Topics: []kmsg.ProduceRequestTopic{{
			Topic:      topic,
			TopicID:    s.topicID(topic),
			Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}},
		}}}
		resp := roundTrip[*kmsg.ProduceResponse](t, s, req)
		return resp.Topics[0].Partitions[0].BaseOffset
	}
	// v1 message set: offset INT64, message_size INT32, crc, magic 1, ...
	msg := make([]byte, 12+22)
	binary.BigEndian.PutUint32(msg[8:], 22)
	msg[16] = 1
	for i, tc := range []struct {
		version int16
		topic   string
		records []byte
		want    int64
	}{
		{9, "a", batch(3), 0},
		{13, "a", batch(2), 3}, // same topic, by ID
		{2, "a", slices.Concat(msg, msg), 5},
		{9, "a", nil, 7},
		{9, "b", batch(1), 0},
	} {
		if got := produce(tc.version, tc.topic, tc.records); got != tc.want {
			t.Errorf("produce %d: base offset %d, want %d", i, got, tc.want)
		}
	}
}

func TestBenignAnswers(t *testing.T) {
	s := start(t, None)

	all := roundTrip[*kmsg.MetadataResponse](t, s, &kmsg.MetadataRequest{Version: 12})
	if len(all.Topics) != 1 || *all.Topics[0].Topic != "hostile" || *all.ClusterID != "hostile" || all.ControllerID != 1 {
		t.Errorf("all-topics metadata: %+v", all)
	}
	id := all.Topics[0].TopicID
	if id == ([16]byte{}) {
		t.Error("zero topic ID")
	}
	byID := roundTrip[*kmsg.MetadataResponse](t, s, &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{TopicID: id}, {TopicID: [16]byte{1}}}})
	if len(byID.Topics) != 2 || *byID.Topics[0].Topic != "hostile" || byID.Topics[0].TopicID != id || byID.Topics[1].ErrorCode != 100 {
		t.Errorf("metadata by topic ID: %+v", byID.Topics)
	}
	named := roundTrip[*kmsg.MetadataResponse](t, s, &kmsg.MetadataRequest{Version: 0, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}})
	if p := named.Topics[0].Partitions; len(p) != 1 || p[0].Leader != 1 || !slices.Equal(p[0].ISR, []int32{1}) {
		t.Errorf("metadata v0 for t: %+v", named.Topics)
	}

	old := roundTrip[*kmsg.FindCoordinatorResponse](t, s, &kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "g"})
	batched := roundTrip[*kmsg.FindCoordinatorResponse](t, s, &kmsg.FindCoordinatorRequest{Version: 6, CoordinatorKeys: []string{"g", "h"}})
	if old.NodeID != 1 || old.Host != s.host || old.Port != s.port || len(batched.Coordinators) != 2 || batched.Coordinators[1].Key != "h" || batched.Coordinators[1].Port != s.port {
		t.Errorf("FindCoordinator: %+v, %+v", old, batched)
	}

	if pid := roundTrip[*kmsg.InitProducerIDResponse](t, s, &kmsg.InitProducerIDRequest{Version: 5}); pid.ProducerID != 1000 || pid.ProducerEpoch != 0 {
		t.Errorf("InitProducerId: %+v", pid)
	}
	lo := roundTrip[*kmsg.ListOffsetsResponse](t, s, &kmsg.ListOffsetsRequest{Version: 11, Topics: []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}}}})
	if p := lo.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 0 {
		t.Errorf("ListOffsets: %+v", p)
	}
	of := roundTrip[*kmsg.OffsetFetchResponse](t, s, &kmsg.OffsetFetchRequest{Version: 9, Groups: []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}})
	if p := of.Groups[0].Topics[0].Partitions[0]; p.Offset != -1 || p.ErrorCode != 0 {
		t.Errorf("OffsetFetch: %+v", p)
	}
	oc := roundTrip[*kmsg.OffsetCommitResponse](t, s, &kmsg.OffsetCommitRequest{Version: 9, Group: "g", Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}})
	if p := oc.Topics[0].Partitions[0]; oc.Topics[0].Topic != "t" || p.ErrorCode != 0 {
		t.Errorf("OffsetCommit: %+v", oc.Topics)
	}

	dg := roundTrip[*kmsg.DescribeGroupsResponse](t, s, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}})
	if g := dg.Groups[0]; g.Group != "g" || g.State != "Stable" || g.ProtocolType != "consumer" || len(g.Members) != 0 {
		t.Errorf("DescribeGroups: %+v", dg.Groups)
	}

	// A key the server does not model, with a top-level error code.
	if lg := roundTrip[*kmsg.ListGroupsResponse](t, s, &kmsg.ListGroupsRequest{Version: 4}); lg.ErrorCode != 35 {
		t.Errorf("ListGroups error %d, want 35 (UNSUPPORTED_VERSION)", lg.ErrorCode)
	}
	// ApiVersions above v4: a v0 answer naming the version to retry with.
	c := dial(t, s)
	send(t, c, request(&kmsg.ApiVersionsRequest{Version: 5}, 9))
	_, resp := decode(t, readFrame(t, c), keyAPIVersions, 0)
	if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != 35 || len(r.ApiKeys) != 1 || r.ApiKeys[0].ApiKey != 18 || r.ApiKeys[0].MaxVersion != 4 {
		t.Errorf("ApiVersions v5: %+v", r)
	}
}

func TestUnmodelledKeyWithoutErrorCodeCloses(t *testing.T) {
	s := start(t, None)
	c := dial(t, s)
	send(t, c, request(&kmsg.CreateTopicsRequest{Version: 4}, 1))
	if got, closed := readFor(c, 2*time.Second); len(got) != 0 || !closed {
		t.Errorf("got %x (closed %v), want a close", got, closed)
	}
}

func TestOneMemberGroup(t *testing.T) {
	s := start(t, None)
	c := dial(t, s)
	send(t, c, request(&kmsg.JoinGroupRequest{Version: 9, Group: "g", ProtocolType: "consumer",
		Protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1, 2}}}}, 1))
	_, resp := decode(t, readFrame(t, c), keyJoinGroup, 9)
	join := resp.(*kmsg.JoinGroupResponse)
	if join.ErrorCode != 0 || join.MemberID == "" || join.LeaderID != join.MemberID || *join.Protocol != "range" ||
		len(join.Members) != 1 || !bytes.Equal(join.Members[0].ProtocolMetadata, []byte{1, 2}) {
		t.Fatalf("JoinGroup: %+v", join)
	}
	send(t, c, request(&kmsg.SyncGroupRequest{Version: 5, Group: "g", Generation: join.Generation, MemberID: join.MemberID,
		GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{{MemberID: join.MemberID, MemberAssignment: []byte{3}}}}, 2))
	_, resp = decode(t, readFrame(t, c), keySyncGroup, 5)
	if sync := resp.(*kmsg.SyncGroupResponse); sync.ErrorCode != 0 || !bytes.Equal(sync.MemberAssignment, []byte{3}) {
		t.Errorf("SyncGroup: %+v", sync)
	}
	send(t, c,
		request(&kmsg.HeartbeatRequest{Version: 4, Group: "g", Generation: join.Generation, MemberID: join.MemberID}, 3),
		request(&kmsg.LeaveGroupRequest{Version: 5, Group: "g", Members: []kmsg.LeaveGroupRequestMember{{MemberID: join.MemberID}}}, 4))
	if _, resp = decode(t, readFrame(t, c), keyHeartbeat, 4); resp.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
		t.Errorf("Heartbeat: %+v", resp)
	}
	if _, resp = decode(t, readFrame(t, c), keyLeaveGroup, 5); resp.(*kmsg.LeaveGroupResponse).Members[0].ErrorCode != 0 {
		t.Errorf("LeaveGroup: %+v", resp)
	}
}

func TestPlaintextForTLSClosesOnClientHello(t *testing.T) {
	s := start(t, PlaintextForTLS)
	c := dial(t, s)
	// A TLS record header (handshake, TLS 1.0 record version, length 200)
	// and the start of a ClientHello.
	send(t, c, []byte{0x16, 0x03, 0x01, 0x00, 0xC8, 0x01, 0x00, 0x00, 0xC4, 0x03, 0x03})
	if got, closed := readFor(c, 2*time.Second); len(got) != 0 || !closed {
		t.Errorf("got %x (closed %v), want a close without a byte", got, closed)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		c    Case
		opts []Option
	}{
		{"no-such-case", nil},
		{MetadataBomb, []Option{At(keyProduce)}},
		{HTTP400, []Option{At(keyMetadata)}},
		{None, []Option{At(keyMetadata)}},
		{HeaderTagsBomb, []Option{At(keyAPIVersions)}},
		{RandomBody, []Option{At(999)}},
	} {
		if s, err := Start(tc.c, tc.opts...); err == nil {
			s.Close()
			t.Errorf("Start(%s) with At: no error", tc.c)
		}
	}
	s, err := Start(MetadataBomb, At(keyMetadata))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestCloseEndsEveryConnection(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, cs := range []Case{Silent, HugeSize, None, HTTP400} {
		s, err := Start(cs)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, s)
		switch cs {
		case None: // a connection in the middle of a long-poll
			send(t, c, request(&kmsg.FetchRequest{Version: 4, MaxWaitMillis: 10_000, MinBytes: 1, Topics: []kmsg.FetchRequestTopic{
				{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}}},
			}}, 1))
		case HTTP400: // a connection that has sent nothing
		default:
			send(t, c, request(&kmsg.ApiVersionsRequest{}, 1))
		}
		time.Sleep(10 * time.Millisecond)
		begin := time.Now()
		if err := s.Close(); err != nil {
			t.Errorf("%s: Close: %v", cs, err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Errorf("%s: Close took %v", cs, d)
		}
		if _, closed := readFor(c, time.Second); !closed {
			t.Errorf("%s: connection still open after Close", cs)
		}
		c.Close()
	}
}
