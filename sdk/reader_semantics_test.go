package sdk_test

// kafka-go's Reader semantics, checked on sdk.Reader and, as the control
// that the expectations are kafka-go's, on kafka.Reader itself: positions
// in partition mode (SetOffset, SetOffsetAt, Offset, Lag, ReadLag), the
// methods each mode refuses, commits in group mode, and Stats.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// partitionReader is what kafka.Reader and sdk.Reader share in partition
// mode.
type partitionReader interface {
	ReadMessage(context.Context) (kafka.Message, error)
	FetchMessage(context.Context) (kafka.Message, error)
	CommitMessages(context.Context, ...kafka.Message) error
	SetOffset(int64) error
	SetOffsetAt(context.Context, time.Time) error
	Offset() int64
	Lag() int64
	ReadLag(context.Context) (int64, error)
	Close() error
}

// semanticsTopic is one partition (1 of 2) holding semanticsMessages
// messages, the i-th at offset i with timestamp semanticsBase + i seconds.
type semanticsTopic struct {
	c     *embedded.Cluster
	topic string
	sent  []kafka.Message

	mu      sync.Mutex
	waiters []fetchWaiter
}

type fetchWaiter struct {
	offset int64
	seen   chan struct{}
}

const (
	semanticsMessages  = 100
	semanticsPartition = 1
)

var semanticsBase = time.UnixMilli(1_700_000_000_000)

func newSemanticsTopic(t *testing.T) *semanticsTopic {
	t.Helper()
	st := &semanticsTopic{c: embedded.StartT(t, embedded.Topic("sem", 2)), topic: "sem"}
	st.sent = deliverytest.Messages("sem", semanticsMessages)
	for i := range st.sent {
		st.sent[i].Time = semanticsBase.Add(time.Duration(i) * time.Second)
	}
	st.produce(t, st.sent...)
	k := st.c.Kfake()
	k.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition != semanticsPartition {
					continue
				}
				st.waiters = slices.DeleteFunc(st.waiters, func(w fetchWaiter) bool {
					if w.offset == rp.FetchOffset {
						close(w.seen)
						return true
					}
					return false
				})
			}
		}
		return nil, nil, false
	})
	return st
}

// fetchAt returns a channel closed once the broker is asked for the
// partition at offset.
func (st *semanticsTopic) fetchAt(offset int64) <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := fetchWaiter{offset: offset, seen: make(chan struct{})}
	st.waiters = append(st.waiters, w)
	return w.seen
}

func (st *semanticsTopic) produce(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(st.c.Addrs()...),
		Topic:        st.topic,
		Balancer:     kafka.BalancerFunc(func(kafka.Message, ...int) int { return semanticsPartition }),
		RequiredAcks: kafka.RequireAll,
		BatchSize:    7, // targets fall inside batches
		BatchTimeout: time.Millisecond,
	}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

func (st *semanticsTopic) config() kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers:   st.c.Addrs(),
		Topic:     st.topic,
		Partition: semanticsPartition,
		MaxWait:   100 * time.Millisecond,
		MaxBytes:  512, // several fetches for the partition
	}
}

// readerEngines makes a partition or group Reader of each engine.
var readerEngines = []struct {
	name string
	new  func(t *testing.T, cfg kafka.ReaderConfig) partitionReader
}{
	{"sdk", func(t *testing.T, cfg kafka.ReaderConfig) partitionReader {
		r, err := sdk.NewReader(cfg, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}},
	{"kafka-go", func(t *testing.T, cfg kafka.ReaderConfig) partitionReader { return kafka.NewReader(cfg) }},
}

// TestReaderPartitionModeSemantics drives a partition Reader through
// kafka-go's positioning calls and checks every message, Offset, Lag and
// ReadLag against kafka-go's meaning, on both engines.
func TestReaderPartitionModeSemantics(t *testing.T) {
	t.Parallel()
	for _, eng := range readerEngines {
		t.Run("engine="+eng.name, func(t *testing.T) {
			t.Parallel()
			if eng.name == "kafka-go" && raceDetector {
				// Its SetOffset bumps r.version while the previous
				// position's reader goroutine reads it unlocked
				// (reader.go:1191 and 1211, v0.4.51).
				t.Skip("kafka.Reader.SetOffset races under -race; the kafka-go control runs without it")
			}
			st := newSemanticsTopic(t)
			r := eng.new(t, st.config())
			defer r.Close()
			ctx := testCtx(t)
			read := func(want int64) {
				t.Helper()
				m, err := r.FetchMessage(ctx)
				if err != nil {
					t.Fatalf("FetchMessage, want offset %d: %v", want, err)
				}
				if m.Offset != want || m.Partition != semanticsPartition || string(m.Value) != string(st.sent[want].Value) {
					t.Fatalf("FetchMessage = %d/%d %q, want %d/%d %q", m.Partition, m.Offset, m.Value, semanticsPartition, want, st.sent[want].Value)
				}
				if !m.Time.Equal(st.sent[want].Time) || m.HighWaterMark != semanticsMessages {
					t.Fatalf("message %d: time %v, high watermark %d; want %v, %d", want, m.Time, m.HighWaterMark, st.sent[want].Time, semanticsMessages)
				}
			}
			position := func(when string, offset, lag int64) {
				t.Helper()
				if got := r.Offset(); got != offset {
					t.Errorf("%s: Offset() = %d, want %d", when, got, offset)
				}
				if got := r.Lag(); got != lag {
					t.Errorf("%s: Lag() = %d, want %d", when, got, lag)
				}
			}

			position("before any read", kafka.FirstOffset, 0)
			if lag, err := r.ReadLag(ctx); err != nil || lag != semanticsMessages {
				t.Errorf("ReadLag before any read = %d, %v; want %d", lag, err, semanticsMessages)
			}
			if err := r.SetOffset(10); err != nil {
				t.Fatal(err)
			}
			position("after SetOffset(10)", 10, 0)
			read(10)
			position("after reading 10", 11, semanticsMessages-11)
			if lag, err := r.ReadLag(ctx); err != nil || lag != semanticsMessages-11 {
				t.Errorf("ReadLag after reading 10 = %d, %v; want %d", lag, err, semanticsMessages-11)
			}
			for o := int64(11); o < 16; o++ {
				read(o)
			}

			// Forward and back while messages of the old position are
			// buffered: none of them may come after the move.
			if err := r.SetOffset(50); err != nil {
				t.Fatal(err)
			}
			for o := int64(50); o < 60; o++ {
				read(o)
			}
			if err := r.SetOffset(3); err != nil {
				t.Fatal(err)
			}
			read(3)
			position("after SetOffset(3) and a read", 4, semanticsMessages-4)

			// SetOffset while a FetchMessage waits at the end of the log.
			if err := r.SetOffset(semanticsMessages - 1); err != nil {
				t.Fatal(err)
			}
			read(semanticsMessages - 1)
			got := make(chan kafka.Message, 1)
			go func() {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					t.Errorf("FetchMessage across SetOffset: %v", err)
				}
				got <- m
			}()
			if err := r.SetOffset(20); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Offset != 20 {
				t.Fatalf("FetchMessage waiting across SetOffset(20) returned offset %d", m.Offset)
			}
			read(21)

			// By timestamp: the first message at or after t; none after
			// the last one moves the reader to the end.
			if err := r.SetOffsetAt(ctx, st.sent[30].Time); err != nil {
				t.Fatal(err)
			}
			read(30)
			if err := r.SetOffsetAt(ctx, st.sent[semanticsMessages-1].Time.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			position("after SetOffsetAt past the last message", kafka.LastOffset, semanticsMessages-31)

			// LastOffset: the next message is the first one written after.
			if err := r.SetOffset(5); err != nil {
				t.Fatal(err)
			}
			read(5)
			atEnd := st.fetchAt(semanticsMessages)
			if err := r.SetOffset(kafka.LastOffset); err != nil {
				t.Fatal(err)
			}
			position("after SetOffset(LastOffset)", kafka.LastOffset, semanticsMessages-6)
			if lag, err := r.ReadLag(ctx); err != nil || lag != 0 {
				t.Errorf("ReadLag at LastOffset = %d, %v; want 0", lag, err)
			}
			next := make(chan kafka.Message, 1)
			go func() {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					t.Errorf("FetchMessage at LastOffset: %v", err)
				}
				next <- m
			}()
			select {
			case <-atEnd:
			case <-ctx.Done():
				t.Fatal("the reader never fetched at the end of the partition")
			}
			extra := kafka.Message{Key: []byte("after"), Value: []byte("after"), Time: semanticsBase.Add(time.Hour)}
			st.produce(t, extra)
			if m := <-next; m.Offset != semanticsMessages || string(m.Value) != "after" {
				t.Fatalf("after SetOffset(LastOffset): offset %d %q, want %d %q", m.Offset, m.Value, semanticsMessages, "after")
			}
			position("after reading past LastOffset", semanticsMessages+1, 0)

			if err := r.CommitMessages(ctx, kafka.Message{Topic: st.topic, Partition: semanticsPartition, Offset: 1}); err == nil ||
				!strings.Contains(err.Error(), "unavailable when GroupID is not set") {
				t.Errorf("CommitMessages without a GroupID = %v, want kafka-go's %q", err, "unavailable when GroupID is not set")
			}
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := r.SetOffset(1); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("SetOffset after Close = %v, want io.ErrClosedPipe", err)
			}
			if err := r.SetOffsetAt(ctx, semanticsBase); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("SetOffsetAt after Close = %v, want io.ErrClosedPipe", err)
			}
			if _, err := r.FetchMessage(ctx); !errors.Is(err, io.EOF) {
				t.Errorf("FetchMessage after Close = %v, want io.EOF", err)
			}
		})
	}
}

// TestReaderGroupModeRefusesPartitionCalls: a group Reader refuses the
// partition-only calls with kafka-go's error text and reports -1 for
// Offset and Lag before it owns a partition, on both engines. Nothing
// here needs the group to form. ReadLag, which kafka-go refuses, is the
// SDK's summed lag of the owned partitions: 0 of none.
func TestReaderGroupModeRefusesPartitionCalls(t *testing.T) {
	t.Parallel()
	addr := deadAddress(t)
	for _, eng := range readerEngines {
		t.Run("engine="+eng.name, func(t *testing.T) {
			r := eng.new(t, kafka.ReaderConfig{Brokers: []string{addr}, GroupID: "g", Topic: "events", MaxWait: 50 * time.Millisecond})
			defer r.Close()
			const want = "unavailable when GroupID is set"
			for name, err := range map[string]error{
				"SetOffset":   r.SetOffset(3),
				"SetOffsetAt": r.SetOffsetAt(context.Background(), time.Now()),
				"ReadLag":     func() error { _, err := r.ReadLag(context.Background()); return err }(),
			} {
				if name == "ReadLag" && eng.name == "sdk" {
					if err != nil {
						t.Errorf("ReadLag in group mode owning nothing: %v, want 0 and no error", err)
					}
					continue
				}
				if name == "SetOffsetAt" && eng.name == "kafka-go" {
					// kafka-go asks the leader first and refuses
					// in the SetOffset it then calls: here the
					// dial fails.
					if err == nil {
						t.Errorf("SetOffsetAt in group mode succeeded")
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s in group mode = %v, want kafka-go's %q", name, err, want)
				}
			}
			if o, l := r.Offset(), r.Lag(); o != -1 || l != -1 {
				t.Errorf("group mode: Offset() = %d, Lag() = %d; want -1, -1", o, l)
			}
		})
	}
}

// committed returns group's committed offset of the partition, -1 when
// there is none.
func (st *semanticsTopic) committed(t *testing.T, group string) int64 {
	t.Helper()
	resp, err := (&kafka.Client{Addr: kafka.TCP(st.c.Addrs()...)}).OffsetFetch(testCtx(t),
		&kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{st.topic: {semanticsPartition}}})
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	for _, p := range resp.Topics[st.topic] {
		if p.Partition == semanticsPartition {
			return p.CommittedOffset
		}
	}
	return -1
}

func (st *semanticsTopic) groupReader(t *testing.T, group string, interval time.Duration) *sdk.Reader {
	t.Helper()
	cfg := st.config()
	cfg.Partition = 0
	cfg.GroupID = group
	cfg.CommitInterval = interval
	cfg.HeartbeatInterval = 100 * time.Millisecond
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReaderCommitSemantics: with CommitInterval 0 ReadMessage has
// committed the message when it returns; with CommitInterval > 0
// CommitMessages only marks (the highest mark wins) and Close commits the
// marks; CommitMessages after Close fails with io.ErrClosedPipe.
func TestReaderCommitSemantics(t *testing.T) {
	t.Parallel()
	st := newSemanticsTopic(t)
	t.Run("CommitInterval=0", func(t *testing.T) {
		t.Parallel()
		r := st.groupReader(t, "sync", 0)
		defer r.Close()
		for range 12 {
			m, err := r.ReadMessage(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if m.Partition != semanticsPartition {
				continue // partition 0 is empty
			}
			if c := st.committed(t, "sync"); c != m.Offset+1 {
				t.Fatalf("ReadMessage returned offset %d; committed %d, want %d", m.Offset, c, m.Offset+1)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := r.CommitMessages(testCtx(t), kafka.Message{Topic: st.topic, Partition: semanticsPartition, Offset: 20}); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("CommitMessages after Close = %v, want io.ErrClosedPipe", err)
		}
	})
	t.Run("CommitInterval=0/concurrent", func(t *testing.T) {
		// Concurrent ReadMessage calls: each message once, and the group's
		// offset never moved back by an earlier message's commit made
		// after a later one's, so it ends past the last.
		t.Parallel()
		r := st.groupReader(t, "concurrent", 0)
		defer r.Close()
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					m, err := r.ReadMessage(ctx)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("ReadMessage: %v", err)
							cancel()
						}
						return
					}
					mu.Lock()
					seen[m.Offset]++
					if len(seen) == semanticsMessages {
						cancel()
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for o, n := range seen {
			if n != 1 {
				t.Errorf("offset %d handed out %d times", o, n)
			}
		}
		if len(seen) != semanticsMessages {
			t.Fatalf("read %d messages, want %d", len(seen), semanticsMessages)
		}
		if c := st.committed(t, "concurrent"); c != semanticsMessages {
			t.Fatalf("committed %d after every message was read and committed, want %d", c, semanticsMessages)
		}
	})
	t.Run("CommitInterval=1h", func(t *testing.T) {
		t.Parallel()
		r := st.groupReader(t, "marks", time.Hour)
		var msgs []kafka.Message
		for range 10 {
			m, err := r.FetchMessage(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		if err := r.CommitMessages(testCtx(t), msgs[2], msgs[6], msgs[4]); err != nil {
			t.Fatal(err)
		}
		if err := r.CommitMessages(testCtx(t), msgs[5]); err != nil {
			t.Fatal(err)
		}
		if c := st.committed(t, "marks"); c != -1 {
			t.Fatalf("committed %d before the interval or Close, want nothing (-1)", c)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if c := st.committed(t, "marks"); c != msgs[6].Offset+1 {
			t.Fatalf("after Close: committed %d, want the highest mark + 1 = %d", c, msgs[6].Offset+1)
		}
		if err := r.CommitMessages(testCtx(t), msgs[9]); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("CommitMessages after Close = %v, want io.ErrClosedPipe", err)
		}
	})
}

// TestReaderStats: kafka-go's counters are deltas since the previous
// call, the configuration fields are the config's, and a group Reader
// reports partition "-1".
func TestReaderStats(t *testing.T) {
	t.Parallel()
	st := newSemanticsTopic(t)
	cfg := st.config()
	cfg.QueueCapacity = 37
	cfg.MinBytes = 3
	cfg.MaxBytes = 2048
	cfg.MaxWait = 150 * time.Millisecond
	r, err := sdk.NewReader(cfg, testOptions(t, sdk.WithClientID("stats-test"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readN := func(n int) (bytes int64) {
		for range n {
			m, err := r.FetchMessage(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			bytes += int64(len(m.Key) + len(m.Value))
		}
		return bytes
	}
	b1 := readN(25)
	s1 := r.Stats()
	s2 := r.Stats()
	b3 := readN(10)
	s3 := r.Stats()
	t.Logf("stats: %+v", s1.ReaderStats)
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"first Messages", s1.Messages, 25}, {"first Bytes", s1.Bytes, b1},
		{"second Messages", s2.Messages, 0}, {"second Bytes", s2.Bytes, 0},
		{"third Messages", s3.Messages, 10}, {"third Bytes", s3.Bytes, b3},
		{"QueueCapacity", s1.QueueCapacity, 37}, {"MinBytes", s1.MinBytes, 3}, {"MaxBytes", s1.MaxBytes, 2048},
		{"Offset", s1.Offset, 25}, {"Lag", s1.Lag, semanticsMessages - 25},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if s1.Fetches < 1 || s1.DeprecatedFetchesWithTypo != s1.Fetches || s1.FetchSize.Count < 1 {
		t.Errorf("first Fetches = %d (typo field %d), FetchSize.Count %d: want at least one fetch", s1.Fetches, s1.DeprecatedFetchesWithTypo, s1.FetchSize.Count)
	}
	if s2.Fetches > 1 || s2.FetchSize.Count != 0 {
		t.Errorf("second call right after the first: Fetches %d, FetchSize.Count %d; the counters are not deltas", s2.Fetches, s2.FetchSize.Count)
	}
	// FetchBytes summarises the bytes handed out of each poll, as
	// kafka-go's does of each fetch: once the Reader's queue is drained,
	// they add up to Bytes.
	handed, fetched := s1.Bytes+s3.Bytes, s1.FetchBytes.Sum+s2.FetchBytes.Sum+s3.FetchBytes.Sum
	for s := s3; s.QueueLength > 0 || fetched == 0; {
		readN(1)
		s = r.Stats()
		handed, fetched = handed+s.Bytes, fetched+s.FetchBytes.Sum
	}
	if fetched != handed || handed == 0 {
		t.Errorf("queue drained: FetchBytes summed %d, Bytes %d; want equal", fetched, handed)
	}
	if s1.MaxWait != 150*time.Millisecond || s1.Topic != st.topic || s1.Partition != fmt.Sprint(semanticsPartition) {
		t.Errorf("MaxWait %v, Topic %q, Partition %q; want 150ms, %q, %q", s1.MaxWait, s1.Topic, s1.Partition, st.topic, fmt.Sprint(semanticsPartition))
	}
	if !strings.HasPrefix(s1.ClientID, "stats-test,") || s1.SDK.ClientID != s1.ClientID || s1.SDK.GroupProtocol != "" {
		t.Errorf("ClientID %q, SDK.ClientID %q, SDK.GroupProtocol %q", s1.ClientID, s1.SDK.ClientID, s1.SDK.GroupProtocol)
	}

	g := st.groupReader(t, "stats", 0)
	defer g.Close()
	if _, err := g.FetchMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	gs := g.Stats()
	// The group's lag and offset, where kafka-go's are -1: the summed lag
	// of the partitions whose lag is known, the position of the one
	// partition when there is one.
	var lag int64
	parts := g.Assignment()
	for _, p := range parts {
		lag += max(p.Lag, 0)
	}
	offset := int64(-1)
	if len(parts) == 1 {
		offset = parts[0].Position
	}
	if gs.Partition != "-1" || gs.Offset != offset || gs.Lag != lag || lag <= 0 || gs.Messages != 1 || gs.Rebalances < 1 ||
		gs.SDK.GroupProtocol != sdk.GroupProtocolClassic {
		t.Errorf("group Reader: Partition %q, Offset %d, Lag %d, Messages %d, Rebalances %d, GroupProtocol %q; want \"-1\", %d, %d (> 0), 1, >= 1, classic",
			gs.Partition, gs.Offset, gs.Lag, gs.Messages, gs.Rebalances, gs.SDK.GroupProtocol, offset, lag)
	}
}

// TestReaderGroupStartsAtHighWatermark: under ReadCommitted, a group
// member without a committed offset and StartOffset LastOffset starts at
// the high watermark, as kafka-go's Reader does, not at the last stable
// offset: the records of a transaction open when it started are not
// handed out once the transaction commits.
func TestReaderGroupStartsAtHighWatermark(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("txn", 1))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "txn", RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("txn", 3)...); err != nil {
		t.Fatal(err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID("open"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("open-1")}, &kgo.Record{Value: []byte("open-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Offsets 0-2 committed, 3-4 in the open transaction: the high
	// watermark is 5, the last stable offset 3.
	firstFetch := make(chan int64, 1)
	c.Kfake().ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Kfake().KeepControl()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				select {
				case firstFetch <- rp.FetchOffset:
				default:
				}
			}
		}
		return nil, nil, false
	})
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "txn", GroupID: "g", StartOffset: kafka.LastOffset,
		IsolationLevel: kafka.ReadCommitted, MaxWait: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := make(chan kafka.Message, 1)
	go func() {
		m, err := r.FetchMessage(testCtx(t))
		if err != nil {
			t.Errorf("FetchMessage: %v", err)
		}
		read <- m
	}()
	select {
	case at := <-firstFetch:
		if at != 5 {
			t.Errorf("the first fetch asked for offset %d, want the high watermark 5", at)
		}
	case <-testCtx(t).Done():
		t.Fatal("no fetch")
	}
	if err := txn.EndTransaction(testCtx(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if m := <-read; string(m.Value) != "after" {
		t.Fatalf("first message %q at offset %d, want %q (the transaction open at the start is not read)", m.Value, m.Offset, "after")
	}
}

// TestReaderFencedCommitDoesNotMoveBack: a member the group dropped (its
// session expired while another member took its partitions and committed
// past them) commits an old message: as kafka-go's, the commit fails with
// the group's refusal, and the other member's offsets stay.
func TestReaderFencedCommitDoesNotMoveBack(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 2), embedded.KfakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("t", 40)...); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 3 * time.Second}
	a, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// From here the broker never sees a's heartbeats (they are answered
	// for it): its session expires and b gets both partitions.
	_, pass := answerHeartbeats(c)
	b, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	readSome(t, b, 40, "b")
	committed := func() map[int]int64 {
		resp, err := (&kafka.Client{Addr: kafka.TCP(c.Addrs()...)}).OffsetFetch(testCtx(t),
			&kafka.OffsetFetchRequest{GroupID: "g", Topics: map[string][]int{"t": {0, 1}}})
		if err != nil {
			t.Fatalf("OffsetFetch: %v", err)
		}
		out := map[int]int64{}
		for _, p := range resp.Topics["t"] {
			out[p.Partition] = p.CommittedOffset
		}
		return out
	}
	want := map[int]int64{0: 20, 1: 20}
	if got := committed(); !maps.Equal(got, want) {
		t.Fatalf("after b read everything: committed %v, want %v", got, want)
	}
	pass() // a learns it was dropped, and joins again
	err = a.CommitMessages(testCtx(t), old)
	if !errors.Is(err, kafka.UnknownMemberId) && !errors.Is(err, kafka.IllegalGeneration) && !errors.Is(err, kafka.RebalanceInProgress) {
		t.Errorf("a: CommitMessages of %d@%d after it was dropped = %v, want the group's refusal", old.Partition, old.Offset, err)
	}
	if got := committed(); !maps.Equal(got, want) {
		t.Fatalf("after a's commit: committed %v, want %v (b's)", got, want)
	}
}

// TestReaderFencedCommitBehindAnotherDoesNotMoveBack: a member the group
// dropped (another member took its partition and committed past it)
// commits an old message while another of its commits waits unanswered,
// learns it was dropped and joins again meanwhile: the old commit, refused
// for the old generation, is not sent in the new one (which the broker
// would take), and the other member's offset stays.
func TestReaderFencedCommitBehindAnotherDoesNotMoveBack(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 1), embedded.KfakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("t", 40)...); err != nil {
		t.Fatal(err)
	}
	addr, hold := commitHoldingProxy(t, c)
	cfg := kafka.ReaderConfig{Brokers: []string{addr}, Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 3 * time.Second}
	a, err := sdk.NewReader(cfg, append(testOptions(t), sdk.WithRetryPolicy(retry.Policy{MaxAttempts: 10,
		Backoff: retry.Backoff{Min: time.Millisecond, Max: time.Millisecond}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	next, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// From here the broker never sees a's heartbeats (they are answered
	// for it): its session expires and b takes the partition.
	fenced, pass := answerHeartbeats(c)
	cfgB := cfg
	cfgB.Brokers = c.Addrs()
	b, err := sdk.NewReader(cfgB, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	readSome(t, b, 40, "b")
	if got := groupCommitted(t, c, "g", "t", 0); got != 40 {
		t.Fatalf("b committed %d, want 40", got)
	}
	// a commits the old message: refused, retried. Then a commit of the
	// next one is held on its way, holding a's turn to commit.
	a.Stats()
	oldDone := make(chan error, 1)
	go func() { oldDone <- a.CommitMessages(testCtx(t), old) }()
	for a.Stats().SDK.Retries == 0 {
		if err := retry.SleepContext(testCtx(t), time.Millisecond); err != nil {
			t.Fatal("the old commit was not refused")
		}
	}
	held, release := hold()
	defer release()
	nextDone := make(chan error, 1)
	go func() { nextDone <- a.CommitMessages(testCtx(t), next) }()
	<-held
	// a learns it was dropped and joins again: wait until the group has
	// a back under a new member ID.
	pass()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for back := false; !back; {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g"}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		g := resp.Groups[0]
		back = g.State == "Stable" && len(g.Members) == 2 &&
			!slices.ContainsFunc(g.Members, func(m kmsg.DescribeGroupsResponseGroupMember) bool { return m.MemberID == fenced() })
		if err := retry.SleepContext(testCtx(t), 10*time.Millisecond); err != nil {
			t.Fatal("a did not join the group again")
		}
	}
	release()
	for name, done := range map[string]chan error{"old": oldDone, "next": nextDone} {
		if err := <-done; !errors.Is(err, kafka.UnknownMemberId) && !errors.Is(err, kafka.IllegalGeneration) && !errors.Is(err, kafka.RebalanceInProgress) {
			t.Errorf("a: CommitMessages of the %s message after it was dropped = %v, want the group's refusal", name, err)
		}
	}
	if got := groupCommitted(t, c, "g", "t", 0); got != 40 {
		t.Fatalf("after a's commits: committed %d, want 40 (b's)", got)
	}
}

// answerHeartbeats answers the heartbeats of the group member whose
// heartbeat c receives first from now on for it, without the group seeing
// them (its session expires), until pass is called. member is its ID.
func answerHeartbeats(c *embedded.Cluster) (member func() string, pass func()) {
	var mu sync.Mutex
	first, passing := "", false
	k := c.Kfake()
	k.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		hb := req.(*kmsg.HeartbeatRequest)
		mu.Lock()
		defer mu.Unlock()
		if first == "" {
			first = hb.MemberID
		}
		if passing || hb.MemberID != first {
			return nil, nil, false
		}
		return hb.ResponseKind(), nil, true
	})
	member = func() string {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	pass = func() {
		mu.Lock()
		defer mu.Unlock()
		passing = true
	}
	return member, pass
}

// TestReaderRejoinsSilently: a member the group removes (an admin's
// LeaveGroup naming it) joins again and goes on reading, as kafka-go's
// does: the removal is not an error of FetchMessage.
func TestReaderRejoinsSilently(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 1), embedded.KfakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := deliverytest.Messages("t", 10)
	if err := w.WriteMessages(testCtx(t), msgs[:3]...); err != nil {
		t.Fatal(err)
	}
	var member atomic.Value
	k := c.Kfake()
	k.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		member.CompareAndSwap(nil, req.(*kmsg.HeartbeatRequest).MemberID)
		return nil, nil, false
	})
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		SessionTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, RebalanceTimeout: 3 * time.Second}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readSome(t, r, 3, "r")
	for member.Load() == nil {
		if _, err := r.ReadLag(testCtx(t)); err != nil { // heartbeats go on meanwhile
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g"
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = member.Load().(string)
	leave.Members = append(leave.Members, m)
	if _, err := leave.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(testCtx(t), msgs[3:]...); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for len(seen) < 7 {
		m, err := r.FetchMessage(testCtx(t))
		if err != nil {
			t.Fatalf("FetchMessage after the group removed the member: %v", err)
		}
		if m.Offset >= 3 {
			seen[m.Offset] = true
		}
	}
}

// TestReaderStatsRebalanceIsNoError: a member's fetch that a rebalance
// (another member joining and leaving) cuts short is not an error of
// Stats, as in kafka-go.
func TestReaderStatsRebalanceIsNoError(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 2))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("t", 20)...); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, CommitInterval: time.Hour}
	a, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.ReadMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	b, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	// b reads once the group gave it a partition: a rebalance a lived.
	if _, err := b.FetchMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Stats are deltas: the sums since a began.
	var rebalances, errs int64
	for rebalances < 2 {
		st := a.Stats()
		rebalances, errs = rebalances+st.Rebalances, errs+st.Errors
		if _, err := a.ReadLag(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); errs+st.Errors != 0 {
		t.Fatalf("Stats over %d rebalances: Errors %d, want 0", rebalances, errs+st.Errors)
	}
}

// TestReaderCommitThroughRebalance: a synchronous commit that meets an
// eager rebalance (REBALANCE_IN_PROGRESS) of a partition the member keeps
// is made in the next generation, not failed.
func TestReaderCommitThroughRebalance(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 1), embedded.Topic("o", 1))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: "t", Value: []byte("x")}, kafka.Message{Topic: "o", Value: []byte("z")}); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 5 * time.Second}
	a, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// b joins for another topic; the rebalance's SyncGroup is held
	// while a commits.
	syncing, release := holdSyncGroup(c)
	cfgB := cfg
	cfgB.Topic, cfgB.GroupTopics = "", []string{"o"}
	b, err := sdk.NewReader(cfgB, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	go func() { _, _ = b.FetchMessage(testCtx(t)) }()
	<-syncing
	time.AfterFunc(time.Second, release)
	if err := a.CommitMessages(testCtx(t), m); err != nil {
		t.Fatalf("commit of a partition a keeps through a rebalance: %v", err)
	}
	if got := groupCommitted(t, c, "g", "t", 0); got != 1 {
		t.Fatalf("committed %d, want 1", got)
	}
}

// TestReaderCommitThroughRebalanceSplit: a commit of two partitions that
// meets an eager rebalance which gives one of them to another member is
// made for the one the member keeps, once the group has settled, without
// waiting out the RebalanceTimeout for the one it lost, which it does not
// commit.
func TestReaderCommitThroughRebalanceSplit(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 2))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: []byte("x")}, kafka.Message{Value: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: time.Minute}
	a, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var msgs []kafka.Message
	for len(msgs) < 2 {
		m, err := a.FetchMessage(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	syncing, release := holdSyncGroup(c)
	b, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	go func() { _, _ = b.FetchMessage(testCtx(t)) }()
	<-syncing
	time.AfterFunc(time.Second, release)
	// Far below the RebalanceTimeout: the commit must not wait for it.
	ctx, cancel := context.WithTimeout(testCtx(t), 15*time.Second)
	defer cancel()
	if err := a.CommitMessages(ctx, msgs...); err != nil {
		t.Fatalf("commit through a rebalance that split the partitions: %v", err)
	}
	kept := a.Assignment()
	if len(kept) != 1 {
		t.Fatalf("a owns %v after the rebalance, want one partition", kept)
	}
	if got := groupCommitted(t, c, "g", "t", kept[0].Partition); got != 1 {
		t.Fatalf("committed %d for the partition a kept, want 1", got)
	}
	if got := groupCommitted(t, c, "g", "t", 1-kept[0].Partition); got != -1 {
		t.Fatalf("committed %d for the partition a lost, want none (-1)", got)
	}
}

// TestReaderCommitAnswerLostThroughRebalance: a synchronous commit whose
// first attempt the broker took but whose answer was lost, and whose
// resend the group refuses as from a member it no longer has, returns nil
// once the member, given the partition again, reads that the group's
// committed offset is the commit's.
func TestReaderCommitAnswerLostThroughRebalance(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("t", 1), embedded.Topic("o", 1))
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: "t", Value: []byte("x")}, kafka.Message{Topic: "o", Value: []byte("z")}); err != nil {
		t.Fatal(err)
	}
	cfg := kafka.ReaderConfig{Brokers: []string{p.Addr()}, Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 5 * time.Second}
	a, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m, err := a.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	// The first OffsetCommit reaches the broker and its answer is lost.
	// The resend is held at the broker until b, reading the other topic,
	// has joined the group: a's heartbeats wait behind the resend on its
	// connection, so the rebalance ends by removing a after the
	// RebalanceTimeout; a joins again and is given "t" again.
	p.OnRequest(func(r kproxy.Request) kproxy.Action {
		if r.Key == keyOffsetCommit && !lost.Swap(true) {
			return kproxy.CloseAfter
		}
		return kproxy.Forward
	})
	second, joined := make(chan struct{}), make(chan struct{})
	var commits atomic.Int32
	k := c.Kfake()
	k.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if commits.Add(1) == 2 {
			close(second)
			k.SleepControl(func() { <-joined })
		}
		return nil, nil, false
	})
	go func() {
		<-second
		defer close(joined)
		cfgB := cfg
		cfgB.Brokers, cfgB.Topic, cfgB.GroupTopics = c.Addrs(), "", []string{"o"}
		b, err := sdk.NewReader(cfgB, testOptions(t)...)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { b.Close() })
		if _, err := b.FetchMessage(testCtx(t)); err != nil {
			t.Error(err)
		}
	}()
	if err := a.CommitMessages(testCtx(t), m); err != nil {
		t.Fatalf("commit taken by the broker, answer lost, resent into the next generation: %v", err)
	}
	if commits.Load() < 2 {
		t.Fatalf("%d OffsetCommit requests: the commit was not resent", commits.Load())
	}
	if got := groupCommitted(t, c, "g", "t", 0); got != 1 {
		t.Fatalf("committed %d, want 1", got)
	}
}

// TestReaderSeekResetsReadMessageCommits: after a Seek back, ReadMessage
// (CommitInterval 0) commits what it reads again, moving the group's
// offset back as Seek's doc says, also when a ReadMessage commit from
// before the Seek was in flight, and when a ReadMessage that fetched its
// message before the Seek commits it after.
func TestReaderSeekResetsReadMessageCommits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		readers int // ReadMessage calls across the Seek: one's commit is held
	}{{"a commit in flight", 1}, {"fetched before, committed after", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, r, hold := commitHoldingReader(t, 6)
			readSome(t, r, 2, "r")
			r.Stats() // from here, Stats counts the messages handed out below
			held, release := hold()
			done := make(chan error, tc.readers)
			for range tc.readers {
				go func() { _, err := r.ReadMessage(testCtx(t)); done <- err }()
			}
			<-held
			for handed := int64(0); handed < int64(tc.readers); handed += r.Stats().Messages {
				if err := retry.SleepContext(testCtx(t), 5*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Seek(testCtx(t), "t", 0, 0); err != nil {
				t.Fatal(err)
			}
			release()
			for range tc.readers {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			m, err := r.ReadMessage(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := groupCommitted(t, c, "g", "t", 0); m.Offset != 0 || got != 1 {
				t.Fatalf("after Seek(0), ReadMessage returned offset %d and the group's offset is %d, want 0 and 1", m.Offset, got)
			}
		})
	}
}

// TestReaderCommitWaitsForItsTurnUntilCtx: a commit waiting behind
// another one not answered yet returns with its ctx.
func TestReaderCommitWaitsForItsTurnUntilCtx(t *testing.T) {
	t.Parallel()
	_, r, hold := commitHoldingReader(t, 2)
	m0, err := r.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	m1, err := r.FetchMessage(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CommitMessages(testCtx(t), m0); err != nil {
		t.Fatal(err)
	}
	held, release := hold()
	defer release()
	go func() { _ = r.CommitMessages(testCtx(t), m1) }()
	<-held
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.CommitMessages(ctx, m1) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CommitMessages behind an unanswered commit = %v, want its ctx's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CommitMessages with a 200 ms ctx still waiting after 10 s behind an unanswered commit")
	}
}

// commitHoldingReader starts a cluster with topic "t" of one partition
// holding n messages, and a Reader of group "g" on it through a
// commitHoldingProxy, closed with the test.
func commitHoldingReader(t *testing.T, n int) (*embedded.Cluster, *sdk.Reader, func() (<-chan struct{}, func())) {
	c := embedded.StartT(t, embedded.Topic("t", 1))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("t", n)...); err != nil {
		t.Fatal(err)
	}
	addr, hold := commitHoldingProxy(t, c)
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "t", GroupID: "g", MaxWait: 100 * time.Millisecond}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return c, r, hold
}

// commitHoldingProxy is a proxy in front of c. hold makes it hold the
// first OffsetCommit request from then on on its way to the broker, and
// its connection with it, until release is called: the group's other
// requests go on. held is closed once that commit arrived.
func commitHoldingProxy(t *testing.T, c *embedded.Cluster) (addr string, hold func() (held <-chan struct{}, release func())) {
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Addr(), func() (<-chan struct{}, func()) {
		arrived, released := make(chan struct{}), make(chan struct{})
		var first atomic.Bool
		p.OnRequest(func(r kproxy.Request) kproxy.Action {
			if r.Key == keyOffsetCommit && first.CompareAndSwap(false, true) {
				close(arrived)
				<-released
			}
			return kproxy.Forward
		})
		var once sync.Once
		return arrived, func() { once.Do(func() { close(released) }) }
	}
}

// holdSyncGroup holds c's SyncGroup requests from now on, the group's
// rebalance with them: syncing is closed once one arrived, release lets
// them through.
func holdSyncGroup(c *embedded.Cluster) (syncing <-chan struct{}, release func()) {
	arrived, released := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	k := c.Kfake()
	k.ControlKey(int16(kmsg.SyncGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		once.Do(func() { close(arrived) })
		select {
		case <-released:
		default:
			k.SleepControl(func() { <-released })
		}
		return nil, nil, false
	})
	return arrived, func() { releaseOnce.Do(func() { close(released) }) }
}

// readSome reads n messages with r's ReadMessage, failing the test, which
// names r as who, on an error.
func readSome(t *testing.T, r interface {
	ReadMessage(context.Context) (kafka.Message, error)
}, n int, who string) {
	t.Helper()
	for range n {
		if _, err := r.ReadMessage(testCtx(t)); err != nil {
			t.Fatalf("%s: ReadMessage: %v", who, err)
		}
	}
}

// groupCommitted is group's committed offset of topic's partition on c.
func groupCommitted(t *testing.T, c *embedded.Cluster, group, topic string, partition int) int64 {
	t.Helper()
	resp, err := (&kafka.Client{Addr: kafka.TCP(c.Addrs()...)}).OffsetFetch(testCtx(t),
		&kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {partition}}})
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Partition == partition {
			return p.CommittedOffset
		}
	}
	return -1
}
