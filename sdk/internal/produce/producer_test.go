package produce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/embedded"
	"github.com/azkafka/azkafka/internal/kproxy"
	"github.com/azkafka/azkafka/retry"
)

const keyProduce = 0

// rig is an embedded broker behind a fault proxy, and a Producer talking
// to the proxy.
type rig struct {
	broker *embedded.Cluster
	proxy  *kproxy.Proxy
	tr     *kafka.Transport
	p      *Producer
	topic  string
}

func newRig(t *testing.T, parts, attempts int) *rig {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic("t", parts))
	px, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p := New(Config{
		Transport:  tr,
		Addr:       kafka.TCP(px.Addr()),
		Policy:     retry.Policy{MaxAttempts: attempts, Backoff: retry.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}},
		Rediscover: func(bool) { tr.CloseIdleConnections() },
	})
	return &rig{broker: c, proxy: px, tr: tr, p: p, topic: "t"}
}

func values(prefix string, n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: fmt.Appendf(nil, "%s-%03d", prefix, i)}
	}
	return msgs
}

// stored reads the values of partition p straight from the broker, in
// offset order.
func (r *rig) stored(t *testing.T, p int) (vals []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", r.broker.Addrs()[0], r.topic, p)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	cl := kafka.Client{Addr: kafka.TCP(r.broker.Addrs()[0])}
	for off := int64(0); off < last; {
		res, err := cl.Fetch(ctx, &kafka.FetchRequest{Topic: r.topic, Partition: p, Offset: off, MaxBytes: 16 << 20})
		if err != nil || res.Error != nil {
			t.Fatalf("fetch partition %d at %d: %v %v", p, off, err, res.Error)
		}
		for {
			rec, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			v := make([]byte, rec.Value.Len())
			_, _ = io.ReadFull(rec.Value, v)
			vals = append(vals, string(v))
			off = rec.Offset + 1
		}
	}
	return vals
}

func wantStored(t *testing.T, got []string, want ...[]kafka.Message) {
	t.Helper()
	var w []string
	for _, msgs := range want {
		for _, m := range msgs {
			w = append(w, string(m.Value))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("stored %d records %v\nwant %d %v", len(got), got, len(w), w)
	}
}

func TestProduceStoresInOrder(t *testing.T) {
	r := newRig(t, 3, 3)
	var produces atomic.Int64
	r.proxy.OnRequest(func(q kproxy.Request) kproxy.Action {
		if q.Key == keyProduce {
			produces.Add(1)
		}
		return kproxy.Forward
	})
	ctx := context.Background()
	first := []*Batch{
		{Topic: "t", Partition: 2, Messages: values("p2a", 5)},
		{Topic: "t", Partition: 0, Messages: values("p0a", 3)},
		{Topic: "t", Partition: 1, Messages: values("p1a", 1)},
	}
	if err := r.p.Produce(ctx, first); err != nil {
		t.Fatal(err)
	}
	for _, b := range first {
		if b.Err != nil || b.Attempts != 1 || b.BaseOffset != 0 {
			t.Fatalf("%s/%d: err %v, attempts %d, base offset %d", b.Topic, b.Partition, b.Err, b.Attempts, b.BaseOffset)
		}
	}
	// One broker leads all three partitions: one request.
	if n := produces.Load(); n != 1 {
		t.Fatalf("%d produce requests for 3 partitions on one broker, want 1", n)
	}
	second := []*Batch{{Topic: "t", Partition: 0, Messages: values("p0b", 4)}}
	if err := r.p.Produce(ctx, second); err != nil || second[0].Err != nil || second[0].BaseOffset != 3 {
		t.Fatalf("second batch: %v %v offset %d", err, second[0].Err, second[0].BaseOffset)
	}
	got := r.stored(t, 0)
	wantStored(t, got, values("p0a", 3), values("p0b", 4))
	st := r.p.Stats()
	if st.ProducerID < 0 || st.Messages != 13 || st.Requests != 2 || st.DuplicateBatches != 0 || st.BatchesResent != 0 {
		t.Fatalf("stats %+v", st)
	}
	if s := r.p.partition("t", 0); s.next != 7 || s.id.id != st.ProducerID {
		t.Fatalf("partition 0 state: next %d, id %+v", s.next, s.id)
	}
}

// The broker stores the batch and the connection dies before its answer:
// the resend is the same batch, which the broker acknowledges without
// storing it again.
func TestProduceResendAfterLostResponseStoresOnce(t *testing.T) {
	r := newRig(t, 1, 5)
	ctx := context.Background()
	if err := r.p.Init(ctx); err != nil { // the InitProducerId must get through
		t.Fatal(err)
	}
	var dropped atomic.Int64
	r.proxy.OnRequest(func(q kproxy.Request) kproxy.Action {
		if q.Key == keyProduce && dropped.Load() < 2 {
			dropped.Add(1)
			return kproxy.CloseAfter
		}
		return kproxy.Forward
	})
	b := &Batch{Topic: "t", Partition: 0, Messages: values("a", 10)}
	if err := r.p.Produce(ctx, []*Batch{b}); err != nil || b.Err != nil {
		t.Fatalf("produce: %v, %v", err, b.Err)
	}
	if b.Attempts != 3 || dropped.Load() != 2 {
		t.Fatalf("%d attempts with %d responses dropped, want 3 and 2", b.Attempts, dropped.Load())
	}
	c := &Batch{Topic: "t", Partition: 0, Messages: values("b", 2)}
	if err := r.p.Produce(ctx, []*Batch{c}); err != nil || c.Err != nil || c.BaseOffset != 10 {
		t.Fatalf("next batch: %v, %v, offset %d", err, c.Err, c.BaseOffset)
	}
	got := r.stored(t, 0)
	wantStored(t, got, values("a", 10), values("b", 2))
	if st := r.p.Stats(); st.DuplicateBatches != 1 || st.BatchesResent != 2 || st.EpochBumps != 0 {
		t.Fatalf("stats %+v, want 1 duplicate batch, 2 resends, no bump", st)
	}
}

// Every attempt's answer is lost: the batch's outcome stays unknown, its
// error is returned, and the partition moves to a new epoch before its
// next batch, so the unknown sequence is never reused for other records.
func TestProduceAmbiguousAfterBudgetResyncs(t *testing.T) {
	r := newRig(t, 1, 3)
	ctx := context.Background()
	if err := r.p.Init(ctx); err != nil {
		t.Fatal(err)
	}
	var dropping atomic.Bool
	dropping.Store(true)
	r.proxy.OnRequest(func(q kproxy.Request) kproxy.Action {
		if q.Key == keyProduce && dropping.Load() {
			return kproxy.CloseAfter
		}
		return kproxy.Forward
	})
	b := &Batch{Topic: "t", Partition: 0, Messages: values("a", 3)}
	if err := r.p.Produce(ctx, []*Batch{b}); err != nil {
		t.Fatal(err)
	}
	if b.Err == nil || !b.Ambiguous || b.Attempts != 3 || !retry.IsTransient(b.Err) {
		t.Fatalf("batch: err %v, ambiguous %v, attempts %d", b.Err, b.Ambiguous, b.Attempts)
	}
	before := r.p.Stats()
	dropping.Store(false)
	c := &Batch{Topic: "t", Partition: 0, Messages: values("b", 2)}
	if err := r.p.Produce(ctx, []*Batch{c}); err != nil || c.Err != nil {
		t.Fatalf("next batch: %v, %v", err, c.Err)
	}
	after := r.p.Stats()
	if after.EpochBumps != 1 || after.ProducerEpoch != before.ProducerEpoch+1 || after.ProducerID != before.ProducerID {
		t.Fatalf("stats before %+v after %+v: want one epoch bump", before, after)
	}
	if h, _, _ := BatchHeader(c.buf); h.BaseSequence != 0 || h.ProducerEpoch != after.ProducerEpoch {
		t.Fatalf("next batch header %+v, want sequence 0 under epoch %d", h, after.ProducerEpoch)
	}
	// The broker stored the first attempt of a (its answer was lost)
	// and nothing of the resends.
	got := r.stored(t, 0)
	wantStored(t, got, values("a", 3), values("b", 2))
}

// A broker that lost the producer's state answers OUT_OF_ORDER_SEQUENCE_NUMBER
// to the only batch in flight: the producer bumps its epoch and resends
// the batch at sequence 0, once.
func TestProduceOutOfOrderBumpsEpoch(t *testing.T) {
	r := newRig(t, 2, 3)
	ctx := context.Background()
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 2)}
	if err := r.p.Produce(ctx, []*Batch{a}); err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	r.p.partition("t", 0).next = 40 // a gap the broker cannot accept
	b := &Batch{Topic: "t", Partition: 0, Messages: values("b", 2)}
	other := &Batch{Topic: "t", Partition: 1, Messages: values("o", 1)}
	if err := r.p.Produce(ctx, []*Batch{b, other}); err != nil || b.Err != nil || other.Err != nil {
		t.Fatal(err, b.Err, other.Err)
	}
	if b.Attempts != 2 {
		t.Fatalf("%d attempts, want 2 (rejected, then resent under a new epoch)", b.Attempts)
	}
	st := r.p.Stats()
	if h, _, _ := BatchHeader(b.buf); st.EpochBumps != 1 || h.ProducerEpoch != st.ProducerEpoch || h.BaseSequence != 0 {
		t.Fatalf("stats %+v, header %+v", st, h)
	}
	if s := r.p.partition("t", 0); s.next != 2 {
		t.Fatalf("partition 0 next sequence %d, want 2", s.next)
	}
	got := r.stored(t, 0)
	wantStored(t, got, values("a", 2), values("b", 2))
	// Partition 1 keeps its epoch until its next batch, then follows.
	o2 := &Batch{Topic: "t", Partition: 1, Messages: values("o2", 1)}
	if err := r.p.Produce(ctx, []*Batch{o2}); err != nil || o2.Err != nil {
		t.Fatal(err, o2.Err)
	}
	if h, _, _ := BatchHeader(o2.buf); h.ProducerEpoch != st.ProducerEpoch || h.BaseSequence != 0 {
		t.Fatalf("partition 1 after the bump: header %+v", h)
	}
	got = r.stored(t, 1)
	wantStored(t, got, values("o", 1), values("o2", 1))
}

// An epoch older than the broker's is fenced: one attempt, an error, no
// spinning; the partition's next batch takes a new producer ID.
func TestProduceFencedEpochNeverSpins(t *testing.T) {
	r := newRig(t, 1, 10)
	ctx := context.Background()
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 1)}
	if err := r.p.Produce(ctx, []*Batch{a}); err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	cur := r.p.current()
	r.p.partition("t", 0).reset = true
	b := &Batch{Topic: "t", Partition: 0, Messages: values("b", 1)}
	if err := r.p.Produce(ctx, []*Batch{b}); err != nil || b.Err != nil {
		t.Fatal(err, b.Err)
	}
	// Go back to the old epoch, which the broker has seen superseded.
	s := r.p.partition("t", 0)
	s.id = cur
	r.p.idMu.Lock()
	r.p.id = cur
	r.p.idMu.Unlock()
	c := &Batch{Topic: "t", Partition: 0, Messages: values("c", 1)}
	if err := r.p.Produce(ctx, []*Batch{c}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.Err, kafka.InvalidProducerEpoch) || c.Attempts != 1 {
		t.Fatalf("old epoch: err %v after %d attempts, want InvalidProducerEpoch after 1", c.Err, c.Attempts)
	}
	if !s.reset {
		t.Fatal("partition not marked for a new epoch")
	}
	// The next batch must not reuse an epoch the broker has seen (b's):
	// it takes a new producer ID, and is stored.
	d := &Batch{Topic: "t", Partition: 0, Messages: values("d", 1)}
	if err := r.p.Produce(ctx, []*Batch{d}); err != nil || d.Err != nil {
		t.Fatal(err, d.Err)
	}
	if st := r.p.Stats(); st.ProducerID == cur.id {
		t.Fatalf("after the fence the producer kept ID %d, want a new one", cur.id)
	}
	got := r.stored(t, 0)
	wantStored(t, got, values("a", 1), values("b", 1), values("d", 1))
}

func TestProduceRejectsTwoBatchesOfOnePartition(t *testing.T) {
	r := newRig(t, 1, 1)
	err := r.p.Produce(context.Background(), []*Batch{
		{Topic: "t", Partition: 0, Messages: values("a", 1)},
		{Topic: "t", Partition: 0, Messages: values("b", 1)},
	})
	if err == nil {
		t.Fatal("no error")
	}
}

// InitProducerId refused by the cluster: every Produce returns an
// *InitError naming the cause, and nothing is sent.
func TestProduceInitRefused(t *testing.T) {
	r := newRig(t, 1, 2)
	var produces atomic.Int64
	r.proxy.OnRequest(func(q kproxy.Request) kproxy.Action {
		if q.Key == keyProduce {
			produces.Add(1)
		}
		return kproxy.Forward
	})
	r.proxy.OnResponse(refuseInitProducerID)
	err := r.p.Produce(context.Background(), []*Batch{{Topic: "t", Partition: 0, Messages: values("a", 1)}})
	var ie *InitError
	if !errors.As(err, &ie) || !errors.Is(err, kafka.ClusterAuthorizationFailed) {
		t.Fatalf("err %v, want an *InitError wrapping ClusterAuthorizationFailed", err)
	}
	if produces.Load() != 0 {
		t.Fatalf("%d produce requests sent without a producer ID", produces.Load())
	}
}

// refuseInitProducerID is a kproxy response hook that turns every
// InitProducerId answer into CLUSTER_AUTHORIZATION_FAILED, as a cluster
// whose authorizer grants neither IdempotentWrite nor Write answers.
func refuseInitProducerID(req kproxy.Request, resp []byte) []byte {
	if req.Key != 22 {
		return resp
	}
	r, err := kproxy.DecodeResponse(req, resp)
	if err != nil {
		return resp
	}
	ir := r.(*kmsg.InitProducerIDResponse)
	ir.ErrorCode, ir.ProducerID, ir.ProducerEpoch = int16(kafka.ClusterAuthorizationFailed), -1, -1
	return kproxy.EncodeResponse(req, ir)
}
