package sdk_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// Kafka API keys the faults aim at.
const (
	keyProduce      = 0
	keyFetch        = 1
	keyOffsetCommit = 8
	keyHeartbeat    = 12
	keyApiVersions  = 18
)

// produceDirect writes msgs straight to the broker, with no fault.
func produceDirect(t testing.TB, rig *faultRig, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(rig.readAddr()),
		Topic:        rig.topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    10, // small record batches, so that reads take many fetches
		BatchTimeout: time.Millisecond,
		Transport:    &kafka.Transport{TLS: rig.tls},
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("producing test messages: %v", err)
	}
}

type readerFault struct {
	name   string
	inject func(p *kproxy.Proxy, injected *atomic.Int64) (stop func())
}

func requestFault(act kproxy.Action, keys ...int16) func(*kproxy.Proxy, *atomic.Int64) func() {
	return func(p *kproxy.Proxy, n *atomic.Int64) func() {
		p.OnRequest(deliverytest.EveryNth(3, 12, act, n, keys...))
		return func() { p.OnRequest(nil) }
	}
}

var readerFaults = []readerFault{
	{"close before fetch or commit", requestFault(kproxy.CloseBefore, keyFetch, keyOffsetCommit, keyHeartbeat)},
	{"close after fetch or commit", requestFault(kproxy.CloseAfter, keyFetch, keyOffsetCommit, keyHeartbeat)},
	{"reset before fetch or commit", requestFault(kproxy.Reset, keyFetch, keyOffsetCommit, keyHeartbeat)},
	{"refuse connects for 400ms", deliverytest.RefuseConnects},
}

// groupTestConfig is a consumer group config tuned for quick rebalances on
// the embedded broker.
func groupTestConfig(rig *faultRig, group string) kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers:           []string{rig.proxy.Addr()},
		GroupID:           group,
		Topic:             rig.topic,
		MaxWait:           50 * time.Millisecond,
		MaxBytes:          1024,
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    2 * time.Second,
		RebalanceTimeout:  2 * time.Second,
		JoinGroupBackoff:  100 * time.Millisecond,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    100 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		Dialer:            &kafka.Dialer{Timeout: 5 * time.Second, TLS: rig.tls},
	}
}

// expireSilentMembers removes from group, until the test ends, every member
// the embedded broker lists that has sent it no request for silence: the
// session expiry Kafka applies and kfake misses in one case. kfake arms a
// classic group member's session timer only when a response reaches the
// member, and the leader's SyncGroup cancels the timer that removes members
// which never synced. So a member whose JoinGroup response found its
// connection closed (a fault cut the coordinator connection while the
// broker held the JoinGroup for the rebalance) stays in the group for good,
// and the generation hands it partitions that nobody then reads. Kafka
// expires such a member after SessionTimeout and rebalances. silence must
// exceed the session plus the rebalance timeout, the longest a live member
// may wait in JoinGroup without sending anything.
func expireSilentMembers(t *testing.T, rig *faultRig, group string, silence time.Duration) {
	var mu sync.Mutex
	lastHeard := map[string]time.Time{}
	hear := func(member string) {
		mu.Lock()
		lastHeard[member] = time.Now()
		mu.Unlock()
	}
	k := rig.broker.Kfake()
	observe := func(member func(kmsg.Request) string) func(kmsg.Request) (kmsg.Response, error, bool) {
		return func(req kmsg.Request) (kmsg.Response, error, bool) {
			if m := member(req); m != "" {
				hear(m)
			}
			return nil, nil, false // not handled: the broker serves it as usual
		}
	}
	k.ControlKey(int16(kmsg.JoinGroup), observe(func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).MemberID }))
	k.ControlKey(int16(kmsg.SyncGroup), observe(func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).MemberID }))
	k.ControlKey(int16(kmsg.Heartbeat), observe(func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).MemberID }))
	k.ControlKey(int16(kmsg.OffsetCommit), observe(func(r kmsg.Request) string { return r.(*kmsg.OffsetCommitRequest).MemberID }))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		transport := &kafka.Transport{TLS: rig.tls}
		defer transport.CloseIdleConnections()
		client := &kafka.Client{Addr: kafka.TCP(rig.readAddr()), Timeout: 5 * time.Second, Transport: transport}
		listed := map[string]time.Time{} // when a member was first listed
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
			if err != nil || len(resp.Groups) != 1 {
				continue
			}
			now := time.Now()
			var silent []kafka.LeaveGroupRequestMember
			mu.Lock()
			for _, m := range resp.Groups[0].Members {
				if _, ok := listed[m.MemberID]; !ok {
					listed[m.MemberID] = now
				}
				last := lastHeard[m.MemberID]
				if l := listed[m.MemberID]; l.After(last) {
					last = l
				}
				if now.Sub(last) > silence {
					silent = append(silent, kafka.LeaveGroupRequestMember{ID: m.MemberID})
				}
			}
			mu.Unlock()
			if len(silent) == 0 {
				continue
			}
			if _, err := client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: group, Members: silent}); err == nil {
				t.Logf("expired %d group member(s) silent for over %v", len(silent), silence)
			}
		}
	}()
}

// TestReaderThroughFaults reads a topic through each fault, as a partition
// reader and as a consumer group member committing every message, and
// requires that the caller sees no error, no message is lost and, for the
// group, the committed offsets reach the end of every partition.
func TestReaderThroughFaults(t *testing.T) {
	const n = 600
	for _, fault := range readerFaults {
		for _, group := range []bool{false, true} {
			name := fault.name + map[bool]string{false: "/partition", true: "/group"}[group]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				parts := 1
				if group {
					parts = 3
				}
				rig := newFaultRig(t, "rfaults", parts)
				sent := deliverytest.Messages("r", n)
				produceDirect(t, rig, sent)

				cfg := kafka.ReaderConfig{
					Brokers:        []string{rig.proxy.Addr()},
					Topic:          rig.topic,
					Partition:      0,
					MaxWait:        50 * time.Millisecond,
					MaxBytes:       1024,
					ReadBackoffMin: 10 * time.Millisecond,
					ReadBackoffMax: 100 * time.Millisecond,
				}
				if group {
					cfg = groupTestConfig(rig, "g-"+t.Name())
					expireSilentMembers(t, rig, cfg.GroupID, 3*cfg.SessionTimeout)
				}
				r, err := sdk.NewReader(cfg, testOptions(t)...)
				if err != nil {
					t.Fatal(err)
				}
				var injected atomic.Int64
				stop := fault.inject(rig.proxy, &injected)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				counts := map[string]int{}
				for len(counts) < n {
					m, err := r.FetchMessage(ctx)
					if err != nil {
						t.Fatalf("FetchMessage after %d distinct messages: %v", len(counts), err)
					}
					counts[string(m.Value)]++
					if group {
						if err := r.CommitMessages(ctx, m); err != nil {
							t.Fatalf("CommitMessages at %d/%d: %v", m.Partition, m.Offset, err)
						}
					}
					// Slow down a little so faults land mid-stream.
					if len(counts)%50 == 0 {
						time.Sleep(20 * time.Millisecond)
					}
				}
				stop()
				st := r.Stats()
				if err := r.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if _, err := r.FetchMessage(ctx); err != io.EOF {
					t.Errorf("FetchMessage after Close = %v, want io.EOF", err)
				}
				lost, dups := deliverytest.LostAndDuplicated(sent, counts)
				t.Logf("faults injected=%d lost=%d duplicates=%d absorbed=%d", injected.Load(), lost, dups, st.SDK.TransientErrors)
				if injected.Load() == 0 {
					t.Fatal("no fault was injected: the test proves nothing")
				}
				if lost != 0 {
					t.Errorf("%d of %d messages never read", lost, n)
				}
				if group {
					rig.requireCommittedToEnd(t, cfg.GroupID)
				}
			})
		}
	}
}

// TestReaderReturnsNonTransientErrorsAndEOF checks the errors that must
// reach the caller: ctx's error, io.EOF after Close, and an invalid config
// as an error rather than kafka-go's panic.
func TestReaderReturnsNonTransientErrorsAndEOF(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "rerrors", 1)
	for _, tc := range []struct {
		name string
		cfg  kafka.ReaderConfig
	}{
		{"no brokers", kafka.ReaderConfig{Topic: "t"}},
		{"group and partition", kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: "t", GroupID: "g", Partition: 2}},
		{"negative heartbeat", kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: "t", GroupID: "g", HeartbeatInterval: -time.Second}},
	} {
		if r, err := sdk.NewReader(tc.cfg, testOptions(t)...); err == nil {
			r.Close()
			t.Errorf("%s: NewReader accepted an invalid config", tc.name)
		}
	}

	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: rig.topic, MaxWait: 50 * time.Millisecond}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing to read and every connection refused: the caller must see
	// only its own deadline, not the refusals.
	rig.proxy.SetRefusing(true)
	rig.proxy.CloseAll()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	_, err = r.FetchMessage(ctx)
	cancel()
	rig.proxy.SetRefusing(false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("FetchMessage on an empty, unreachable topic = %v, want context.DeadlineExceeded", err)
	}
	if err := r.CommitMessages(context.Background(), kafka.Message{}); err == nil {
		t.Error("CommitMessages without a group succeeded, want kafka-go's error")
	}

	done := make(chan error, 1)
	go func() {
		_, err := r.ReadMessage(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Errorf("ReadMessage blocked across Close = %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadMessage did not return after Close")
	}
}

// TestRawReaderSurfacesCommitFaults is the control for the group cases
// above: kafka-go's own Reader returns the connection error of a failed
// commit to the caller. If it stops doing so, the SDK cases prove less.
func TestRawReaderSurfacesCommitFaults(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "rcontrol", 1)
	sent := deliverytest.Messages("rc", 200)
	produceDirect(t, rig, sent)
	var injected atomic.Int64
	rig.proxy.OnRequest(deliverytest.EveryNth(2, 50, kproxy.CloseBefore, &injected, keyOffsetCommit))
	r := kafka.NewReader(groupTestConfig(rig, "control"))
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range sent {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("FetchMessage %d: %v", i, err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Logf("kafka.Reader.CommitMessages failed after %d faults: %v", injected.Load(), err)
			return
		}
	}
	t.Fatalf("kafka.Reader surfaced no commit error through %d commit faults", injected.Load())
}

// countingHandler counts the log records it receives.
// countingHandler counts the lines an operator sees: Info and up (the
// engine's own chatter goes to Debug).
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestReaderCommitErrors: a commit error that is not transient reaches the
// caller at once, and ReadMessage still returns the message it fetched; a
// run of transient commit errors is absorbed and logged at most once per
// 5 s.
func TestReaderCommitErrors(t *testing.T) {
	t.Parallel()
	const groupAuthorizationFailed = 30
	for _, tc := range []struct {
		name      string
		transient bool
	}{
		{"permanent: group authorization failed", false},
		{"transient: connection closed before every other commit", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "rcommit", 1)
			sent := deliverytest.Messages("c", 6) // each closed commit costs a group rejoin
			produceDirect(t, rig, sent)
			var commits atomic.Int64
			if tc.transient {
				rig.proxy.OnRequest(func(r kproxy.Request) kproxy.Action {
					if r.Key == keyOffsetCommit && commits.Add(1)%2 == 1 {
						return kproxy.CloseBefore
					}
					return kproxy.Forward
				})
			} else {
				refuse := kproxy.FailCommits(groupAuthorizationFailed, func(err error) { t.Errorf("decoding OffsetCommit response: %v", err) })
				rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
					if req.Key == keyOffsetCommit {
						commits.Add(1)
					}
					return refuse(req, resp)
				})
			}
			logs := &countingHandler{}
			r, err := sdk.NewReader(groupTestConfig(rig, "commit-"+tc.name), testOptions(t, sdk.WithLogger(slog.New(logs)))...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			for i := 0; i < len(sent); i++ {
				m, err := r.ReadMessage(ctx)
				if tc.transient {
					if err != nil {
						t.Fatalf("ReadMessage %d: %v", i, err)
					}
					continue
				}
				if !errors.Is(err, kafka.GroupAuthorizationFailed) {
					t.Fatalf("ReadMessage = %v, want the commit's kafka.GroupAuthorizationFailed", err)
				}
				if string(m.Value) != string(sent[0].Value) {
					t.Errorf("ReadMessage returned message %q with the commit error, want the fetched %q", m.Value, sent[0].Value)
				}
				return
			}
			st := r.Stats()
			maxLines := 1 + int64(time.Since(start)/(5*time.Second))
			t.Logf("commits sent %d, transient errors absorbed %d, log lines %d", commits.Load(), st.SDK.TransientErrors, logs.n.Load())
			if st.SDK.TransientErrors < 2 {
				t.Errorf("absorbed %d transient commit errors, want several", st.SDK.TransientErrors)
			}
			if logs.n.Load() > maxLines {
				t.Errorf("%d log lines for %d absorbed errors in %v, want at most %d", logs.n.Load(), st.SDK.TransientErrors, time.Since(start), maxLines)
			}
		})
	}
}

// TestReaderCloseCutsBackoff: Close ends a FetchMessage that is waiting in
// a long retry backoff at once, with io.EOF.
func TestReaderCloseCutsBackoff(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "rclose", 1)
	rig.proxy.SetRefusing(true)
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers:        []string{rig.proxy.Addr()},
		Topic:          rig.topic,
		MaxAttempts:    1, // kafka-go surfaces the first failed dial
		ReadBackoffMin: 10 * time.Millisecond,
		ReadBackoffMax: 20 * time.Millisecond,
	}, testOptions(t, sdk.WithRetry(1000, 10*time.Second, 10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.FetchMessage(context.Background())
		done <- err
	}()
	// Wait until the reader has absorbed an error, so it is in backoff.
	for deadline := time.Now().Add(10 * time.Second); r.Stats().SDK.TransientErrors == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no transient error absorbed within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	r.Close()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Errorf("FetchMessage = %v, want io.EOF", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("FetchMessage returned %v after Close, inside a 10s backoff", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("FetchMessage still blocked 5s after Close")
	}
}
