package sdk

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/deliverytest"
	"github.com/azkafka/azkafka/internal/embedded"
	"github.com/azkafka/azkafka/internal/kproxy"
	"github.com/azkafka/azkafka/sdk/internal/produce"
)

// TestIdempotentSyncCallQueuedBehindStuckBatchEndsWithItsCtx: a sync
// call whose messages wait behind another call's batch that gets no
// answer returns its ctx's error once its ctx ends, and its messages are
// never sent.
func TestIdempotentSyncCallQueuedBehindStuckBatchEndsWithItsCtx(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("queued", 1))
	px, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	held, release := make(chan struct{}), make(chan struct{})
	var first bool
	px.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key == 0 && !first { // one connection's responses run in order
			first = true
			close(held)
			<-release // the first Produce answer waits for the test
		}
		return resp
	})
	w, err := NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(px.Addr()),
		Topic:        "queued",
		RequiredAcks: kafka.RequireAll,
		WriteTimeout: 30 * time.Second, // the held attempt does not time out
	}, WithAZ("az-a"), WithIdempotence(true), WithLogger(slog.New(slog.DiscardHandler)),
		WithGetenv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	releaseOnce := func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}
	t.Cleanup(func() { releaseOnce(); w.Close() })
	wait, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()

	resA := make(chan error, 1)
	go func() { resA <- w.WriteMessages(wait, kafka.Message{Value: []byte("a")}) }()
	select {
	case <-held:
	case <-wait.Done():
		t.Fatal("call A's batch never reached the broker")
	}

	bctx, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	enqueued := make(chan struct{})
	w.idem.q.mu.Lock()
	w.idem.q.testEnqueued = func(ctx context.Context) {
		if ctx == bctx {
			close(enqueued)
		}
	}
	w.idem.q.mu.Unlock()
	resB := make(chan error, 1)
	go func() { resB <- w.WriteMessages(bctx, kafka.Message{Value: []byte("b")}) }()
	select {
	case <-enqueued:
	case <-wait.Done():
		t.Fatal("call B's message never joined the queue")
	}
	cancelB()
	select {
	case err := <-resB:
		var werrs kafka.WriteErrors
		if !errors.As(err, &werrs) || len(werrs) != 1 || !errors.Is(werrs[0], context.Canceled) {
			t.Fatalf("call B: %v, want kafka.WriteErrors with one error wrapping context.Canceled", err)
		}
	case <-wait.Done():
		t.Fatal("call B did not return within 10s of its ctx ending: it waited for call A's batch")
	}

	releaseOnce()
	if err := <-resA; err != nil {
		t.Fatalf("call A: %v", err)
	}
	// A later call's batch would carry b if it still waited in the queue.
	if err := w.WriteMessages(wait, kafka.Message{Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	got := deliverytest.ConsumeAll(wait, t, deliverytest.Topic{Addrs: c.Addrs(), Name: "queued", Partitions: 1})
	if len(got) != 2 || got["a"] != 1 || got["c"] != 1 {
		t.Fatalf("stored %v, want a and c once, b never", got)
	}
}

// TestIdempotentFlightOutlivesEndedCall: a flight that carries messages of
// a call whose ctx already ended and of a live call is produced for the
// live one: the ended call cannot cancel it before the live one counts.
func TestIdempotentFlightOutlivesEndedCall(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("ended", 1))
	w, err := NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(c.Addrs()[0]),
		Topic:        "ended",
		RequiredAcks: kafka.RequireAll,
	}, WithAZ("az-a"), WithIdempotence(true), WithLogger(slog.New(slog.DiscardHandler)),
		WithGetenv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("first")}); err != nil {
		t.Fatal(err) // the producer ID and metadata are in place
	}
	ended, end := context.WithCancel(context.Background())
	end()
	q := w.idem.q
	key := assigned{"ended", 0}
	for i := range 200 { // each round gives the ended call's callback a head start
		dead := &call{ctx: ended, n: 1, remaining: 1, done: make(chan struct{})}
		live := &call{ctx: ctx, n: 1, remaining: 1, done: make(chan struct{})}
		msgs := []kafka.Message{{Value: []byte("dead")}, {Value: []byte("live")}}
		q.mu.Lock()
		q.parts[key] = &pendingPart{busy: true} // as the loop leaves it for a flight
		q.flying++
		q.mu.Unlock()
		q.flush(flight{
			batches: []*produce.Batch{{Topic: key.topic, Partition: key.partition, Messages: msgs}},
			calls:   [][]callRef{{{dead, 0}, {live, 0}}},
		})
		select {
		case <-live.done:
		case <-ctx.Done():
			t.Fatal("the live call was never settled")
		}
		if live.errs != nil {
			t.Fatalf("round %d: the live call's batch failed: %v", i, live.errs)
		}
	}
}

// TestIdempotentQueueForgetsIdlePartitions: once a partition's batches
// are all settled and nothing waits, the queue keeps no state for it.
func TestIdempotentQueueForgetsIdlePartitions(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("idle", 4))
	w, err := NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(c.Addrs()[0]),
		Topic:        "idle",
		RequiredAcks: kafka.RequireAll,
	}, WithAZ("az-a"), WithIdempotence(true), WithLogger(slog.New(slog.DiscardHandler)),
		WithGetenv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs := make([]kafka.Message, 8) // round robin: every partition
	for i := range msgs {
		msgs[i].Value = []byte{byte('a' + i)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	q := w.idem.q
	q.mu.Lock()
	n := len(q.parts)
	q.mu.Unlock()
	if n != 0 {
		t.Fatalf("the queue keeps %d partitions after every message was settled, want 0", n)
	}
}
