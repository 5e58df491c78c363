package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// TestReaderGroupLag: with a GroupID, Lag, Offset, ReadLag, Stats and
// Assignment give each owned partition's committed offset, position, high
// watermark and lag (kafka-go's are -1 or an error): after 10 of 30
// messages over 3 partitions are read and committed, ReadLag is exactly 20,
// Lag and Stats().Lag agree with it, and each partition's committed offset
// is its position.
func TestReaderGroupLag(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "group-lag", 3)
	const total, read = 30, 10
	w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, Balancer: &kafka.RoundRobin{}, RequiredAcks: kafka.RequireAll}
	msgs := make([]kafka.Message, total)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: fmt.Appendf(nil, "m%d", i)}
	}
	if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cfg := groupTestConfig(rig, "group-lag")
	cfg.QueueCapacity = 1
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if lag := r.Lag(); lag != -1 {
		t.Errorf("Lag before any assignment = %d, want -1", lag)
	}
	ctx := testCtx(t)
	handed := map[int]int64{} // partition -> next offset
	for range read {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
		handed[m.Partition] = m.Offset + 1
	}
	lag, err := r.ReadLag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lag != total-read {
		t.Errorf("ReadLag = %d, want %d", lag, total-read)
	}
	if got := r.Lag(); got != total-read {
		t.Errorf("Lag = %d, want %d", got, total-read)
	}
	if got := r.Stats().Lag; got != total-read {
		t.Errorf("Stats().Lag = %d, want %d", got, total-read)
	}
	parts := r.Assignment()
	if len(parts) != 3 {
		t.Fatalf("Assignment = %+v, want 3 partitions", parts)
	}
	var sum int64
	for _, p := range parts {
		if p.Topic != rig.topic || p.HighWatermark != total/3 {
			t.Errorf("%+v: want topic %s, high watermark %d", p, rig.topic, total/3)
		}
		if next, ok := handed[p.Partition]; ok && (p.Position != next || p.Committed != next || p.FetchedFrom != 0 || p.FetchedFromAddr == "") {
			t.Errorf("%+v: want position and committed %d, fetched from node 0", p, next)
		}
		sum += p.Lag
	}
	if sum != total-read {
		t.Errorf("the partitions' lags sum to %d, want %d", sum, total-read)
	}
	// Offset is a position only with one partition owned.
	if got := r.Offset(); got != -1 {
		t.Errorf("Offset with 3 partitions = %d, want -1", got)
	}
}

// TestReaderHealth: Health says ok while the broker answers, unreachable
// once it has not answered for longer than MaxWait (the Reader keeps
// retrying, and a readiness check fails), ok again as soon as it answers,
// and closed after Close.
func TestReaderHealth(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "health", 1)
	rig.write(t, kafka.Message{Value: []byte("v")})
	const bound = 200 * time.Millisecond
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: rig.topic, MaxWait: bound}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h := r.Health(); h.State != sdk.HealthStarting || !h.Healthy() {
		t.Errorf("before any read: %+v, want starting and healthy", h)
	}
	if _, err := r.FetchMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	h := r.Health()
	if h.State != sdk.HealthOK || !h.Healthy() || h.LastFetch.IsZero() || h.Assigned != 1 || h.Cause != nil {
		t.Errorf("after a read: %+v, want ok, a last fetch, 1 partition", h)
	}

	if err := rig.proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	rig.proxy.CloseAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fetched := make(chan error, 1)
	go func() { _, err := r.FetchMessage(ctx); fetched <- err }()
	down := waitHealth(t, testCtx(t), r, sdk.HealthUnreachable)
	if down.Healthy() || down.Cause == nil || time.Since(down.Since) < bound {
		t.Errorf("unreachable: %+v, want unhealthy with a cause, since more than %v ago", down, bound)
	}

	if err := rig.proxy.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	up := waitHealth(t, testCtx(t), r, sdk.HealthOK)
	if !up.Healthy() || up.Cause != nil || !up.Since.After(down.Since) {
		t.Errorf("back: %+v, want healthy since after %v", up, down.Since)
	}
	cancel()
	if err := <-fetched; !errors.Is(err, context.Canceled) {
		t.Errorf("FetchMessage: %v, want the ctx's error", err)
	}
	r.Close()
	if h := r.Health(); h.State != sdk.HealthClosed || h.Healthy() {
		t.Errorf("after Close: %+v, want closed", h)
	}
}

// waitHealth waits for r's health to reach state, an event the Reader's
// engine causes: it looks every 10 ms until then, failing when ctx (the
// test's) ends first.
func waitHealth(t *testing.T, ctx context.Context, r *sdk.Reader, state sdk.HealthState) sdk.ReaderHealth {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		h := r.Health()
		if h.State == state {
			return h
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("health still %+v, want %s", h, state)
		}
	}
}

// TestReaderReadCommitted: with IsolationLevel kafka.ReadCommitted the
// Reader hands out the committed transactions' messages once each, in
// order, and none of the aborted one's; with the default (read
// uncommitted) it hands out all of them. The data comes from a real
// transactional producer (franz-go's).
func TestReaderReadCommitted(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "txn", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(rig.broker.Addrs()...), kgo.TransactionalID("txn-test"), kgo.DefaultProduceTopic(rig.topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	for _, txn := range []struct {
		prefix string
		n      int
		end    kgo.TransactionEndTry
	}{{"c1", 3, kgo.TryCommit}, {"a", 3, kgo.TryAbort}, {"c2", 2, kgo.TryCommit}} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range txn.n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", txn.prefix, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, txn.end); err != nil {
			t.Fatal(err)
		}
	}
	read := func(level kafka.IsolationLevel, n int) []string {
		r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: rig.topic, MaxWait: 50 * time.Millisecond,
			IsolationLevel: level}, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got []string
		for range n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Value))
		}
		// Nothing more: the end of the log is a transaction marker.
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if m, err := r.FetchMessage(short); err == nil {
			got = append(got, string(m.Value))
		}
		return got
	}
	if got, want := read(kafka.ReadCommitted, 5), []string{"c1-0", "c1-1", "c1-2", "c2-0", "c2-1"}; !slices.Equal(got, want) {
		t.Errorf("read committed: %v, want %v", got, want)
	}
	if got, want := read(kafka.ReadUncommitted, 8), []string{"c1-0", "c1-1", "c1-2", "a-0", "a-1", "a-2", "c2-0", "c2-1"}; !slices.Equal(got, want) {
		t.Errorf("read uncommitted: %v, want %v", got, want)
	}
}

// TestReaderCommitsPastMarkers: ReadMessage with a commit per message over
// single-message transactions commits past each, and past the log's last
// marker with the read that takes it (the group has no lag then, as
// kafka-go's, which hands markers out and commits them); a marker its
// poll returned a message after is not committed on its own (that
// message's commit covers it), so the commits are the messages' and the
// last marker's.
func TestReaderCommitsPastMarkers(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "markers", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(rig.broker.Addrs()...), kgo.TransactionalID("markers"), kgo.DefaultProduceTopic(rig.topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	const n = 10
	for i := range n {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "m%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	var commits atomic.Int64
	rig.proxy.OnRequest(func(req kproxy.Request) kproxy.Action {
		if req.Key == keyOffsetCommit {
			commits.Add(1)
		}
		return kproxy.Forward
	})
	r, err := sdk.NewReader(groupTestConfig(rig, "markers"), testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("m%d", i); string(m.Value) != want || m.Offset != int64(2*i) {
			t.Fatalf("message %q at %d, want %q at %d", m.Value, m.Offset, want, 2*i)
		}
	}
	// The next read takes the last marker, commits past it and waits for
	// a message: ended once the group's offset is the log's end.
	wait, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		m, err := r.ReadMessage(wait)
		if err == nil {
			err = fmt.Errorf("a message %q at %d", m.Value, m.Offset)
		}
		done <- err
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for groupCommitted(t, rig.broker, "markers", rig.topic, 0) != 2*n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the group's offset %d, want the log's end %d", groupCommitted(t, rig.broker, "markers", rig.topic, 0), 2*n)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("ReadMessage past the last marker: %v; want ctx's error", err)
	}
	// A commit per message, and one per marker its poll returned last of
	// the partition (the log's last one among them): at most one per
	// fetch, where committing every marker makes 2n.
	fetches := r.Stats().Fetches
	if got := commits.Load(); got < n+1 || got > n+fetches || got >= 2*n {
		t.Errorf("%d commits in %d fetches, want from %d to %d (one per message and one past a poll's last marker), fewer than %d (one per marker)",
			got, fetches, n+1, n+fetches, 2*n)
	}
	if lag := r.Lag(); lag != 0 {
		t.Errorf("Lag %d, want 0", lag)
	}
}
