package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
	"github.com/azkafka/azkafka/metrics"
)

// TestPolicyMetrics: the connection policy reports each dial, each
// connection's end with its cause, and each wait with its reason, as
// ConnStats counts them.
func TestPolicyMetrics(t *testing.T) {
	srv := startServer(t)
	fc := newFakeClock()
	p := testPolicy(fc, rate.NewLimiter(10, 1))
	rec := metricstest.New().Recorder(metrics.Client{}).(*metricstest.Recorder)
	p.rec = rec
	dial := p.wrap(netDial, false)
	ctx := context.Background()
	connect := func(h func(net.Conn)) net.Conn {
		t.Helper()
		srv.handle(h)
		c, err := dial(ctx, "tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The peer closes before answering (early), then after answering.
	c := connect(closeWithoutAnswer)
	if _, err := exchange(t, c); !errors.Is(err, io.EOF) {
		t.Fatalf("err %v, want io.EOF", err)
	}
	c.Close()
	c = connect(func(c net.Conn) {
		buf := make([]byte, 64)
		c.Read(buf)
		c.Write([]byte("response"))
		c.Read(buf)
		c.Close()
	})
	if answered, err := exchange(t, c); !answered || err != nil {
		t.Fatalf("first exchange: %v %v", answered, err)
	}
	if _, err := exchange(t, c); !errors.Is(err, io.EOF) {
		t.Fatalf("second exchange: %v, want io.EOF", err)
	}
	c.Close()
	// The client closes a connection that served, then one that did not
	// answer yet.
	c = connect(answerThenClose)
	if answered, err := exchange(t, c); !answered || err != nil {
		t.Fatalf("exchange: %v %v", answered, err)
	}
	c.Close()
	c = connect(func(c net.Conn) { c.Read(make([]byte, 64)); c.Read(make([]byte, 64)); c.Close() })
	if _, err := c.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// A refused dial.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	if _, err := dial(ctx, "tcp", refused); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err %v, want ECONNREFUSED", err)
	}

	st := p.stats.snapshot()
	counts := rec.Counts()
	for key, want := range map[string]int64{
		"dialed ok":          st.ConnectionsCreated,
		"dialed error":       st.DialFailures,
		"closed peer_early":  1,
		"closed peer":        1,
		"closed local":       1,
		"closed local_early": 1,
		"waited limiter ns":  int64(st.LimiterWait),
		"waited redial ns":   int64(st.BackoffWait),
	} {
		if counts[key] != want {
			t.Errorf("%s = %d, want %d (stats %+v)", key, counts[key], want, st)
		}
	}
	if st.ConnectionsCreated != 4 || st.DialFailures != 1 || st.EarlyCloses != 2 || st.PeerCloses != 2 {
		t.Errorf("stats %+v: the scenario did not happen as planned", st)
	}
	if counts["waited limiter"] != 4 || counts["waited redial"] != 2 {
		t.Errorf("waits %v, want 4 for the limiter (every dial after the first) and 2 re-dials (after each peer close)", counts)
	}
}

// TestZoneFallbackMetrics: the zone fallback reports each turn on and off,
// once.
func TestZoneFallbackMetrics(t *testing.T) {
	now := time.Unix(1000, 0)
	z := newZoneFallback("az-b", slog.New(slog.DiscardHandler))
	rec := metricstest.New().Recorder(metrics.Client{}).(*metricstest.Recorder)
	z.rec = rec
	z.now = func() time.Time { return now }
	rack := "az-b"
	inZone := kgo.BrokerMetadata{NodeID: 2, Rack: &rack}
	z.active()
	z.failed(inZone)
	z.active()
	z.active()
	z.served(inZone)
	z.active()
	z.failed(inZone)
	z.active()
	now = now.Add(ZoneFallbackHold)
	z.active()
	if got, want := rec.ZoneFallbacks(), []bool{true, false, true, false}; !slices.Equal(got, want) {
		t.Fatalf("ZoneFallback events %v, want %v", got, want)
	}
}

// TestProducerWatch: a new producer ID or a higher epoch is reported once;
// a request written before a bump is not a change.
func TestProducerWatch(t *testing.T) {
	rec := metricstest.New().Recorder(metrics.Client{}).(*metricstest.Recorder)
	p := &producerWatch{rec: rec}
	for _, id := range [][2]int64{{7, 0}, {7, 0}, {7, 1}, {7, 0}, {7, 1}, {9, 0}, {-1, -1}} {
		p.saw(id[0], int16(id[1]))
	}
	if got, want := rec.ProducerIDs(), [][2]int64{{7, 0}, {7, 1}, {9, 0}, {-1, -1}}; !slices.Equal(got, want) {
		t.Fatalf("ProducerID events %v, want %v", got, want)
	}
}

func TestErrorType(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("produce: %w", kerr.NotLeaderForPartition), "NOT_LEADER_FOR_PARTITION"},
		{kafkaError(kerr.TopicAuthorizationFailed), "TOPIC_AUTHORIZATION_FAILED"},
		{io.EOF, "connection_closed"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "connection_closed"},
		{refused, "connection_refused"},
		{context.DeadlineExceeded, "timeout"},
		{os.ErrDeadlineExceeded, "timeout"},
		{fmt.Errorf("sdk: not acknowledged: %w", kgo.ErrRecordTimeout), "delivery_timeout"},
		{&frameguard.Error{Addr: "b:9092", Reason: "not Kafka"}, "bad_response"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "tls"},
		{context.Canceled, "canceled"},
		{kgo.ErrClientClosed, "client_closed"},
		{errors.New("something else"), "_OTHER"},
	} {
		if got := errorType(c.err); got != c.want {
			t.Errorf("errorType(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// nullConn is a net.Conn whose Read and Write take every byte at once.
type nullConn struct{ net.Conn }

func (nullConn) Read(b []byte) (int, error)  { return len(b), nil }
func (nullConn) Write(b []byte) (int, error) { return len(b), nil }

// TestHooksAllocateNothing: the hooks the engine calls per request and per
// batch, and the connection wrapper's Read and Write, allocate nothing,
// with no Recorder and with one (the Recorder's own cost aside).
func TestHooksAllocateNothing(t *testing.T) {
	rack := "az-a"
	meta := kgo.BrokerMetadata{NodeID: 1, Host: "127.0.0.1", Port: 9092, Rack: &rack}
	for _, rec := range []metrics.Recorder{nil, metrics.Nop{}} {
		t.Run(fmt.Sprintf("recorder=%T", rec), func(t *testing.T) {
			s := &session{config: config{az: "az-a", logger: slog.New(slog.DiscardHandler)}, policy: &connPolicy{}}
			if rec != nil {
				s.metrics = metrics.ProviderFunc(func(metrics.Client) metrics.Recorder { return rec })
			}
			s.startRecorder(metrics.Client{Kind: metrics.KindReader})
			h := newEngineHooks(s, &counters{}, true, nil)
			wh := &writerHooks{counters: &counters{}, rec: s.rec, metrics: h.metrics}
			if (h.metrics != nil) != (rec != nil) {
				t.Fatalf("metrics hooks %v with recorder %v", h.metrics, rec)
			}
			pc := &policyConn{Conn: nullConn{}, policy: s.policy, st: new(addrState), addr: "127.0.0.1:9092", needTurns: 1}
			pc.served.Store(true)
			buf := make([]byte, 64)
			watch := &producerWatch{rec: metrics.Nop{}}
			watch.saw(5, 1)
			calls := []struct {
				name string
				f    func()
			}{
				{"engine OnBrokerRead", func() { h.OnBrokerRead(meta, fetchKey, 100, time.Millisecond, time.Millisecond, nil) }},
				{"engine OnFetchBatchRead", func() { h.OnFetchBatchRead(meta, "t", 0, kgo.FetchBatchMetrics{NumRecords: 10}) }},
				{"writer OnBrokerWrite", func() { wh.OnBrokerWrite(meta, produceKey, 100, 0, time.Millisecond, nil) }},
				{"writer OnProduceBatchWritten", func() { wh.OnProduceBatchWritten(meta, "t", 0, kgo.ProduceBatchMetrics{NumRecords: 10}) }},
				{"conn Read", func() { pc.Read(buf) }},
				{"conn Write", func() { pc.Write(buf) }},
				{"producer watch", func() { watch.saw(5, 1) }},
			}
			if m := h.metrics; m != nil {
				calls = append(calls, []struct {
					name string
					f    func()
				}{
					{"metrics OnBrokerE2E", func() { m.OnBrokerE2E(meta, fetchKey, kgo.BrokerE2E{BytesWritten: 10, BytesRead: 100}) }},
					{"metrics released", func() { m.released("t", 1) }},
				}...)
			}
			for _, c := range calls {
				c.f() // first use: maps and caches filled
				if n := testing.AllocsPerRun(200, c.f); n != 0 {
					t.Errorf("%s: %v allocations per call", c.name, n)
				}
			}
		})
	}
}

// BenchmarkHookEvents measures, without a broker's noise, what the engine
// spends in the SDK's hooks for one produce request of 100 messages in 6
// batches (request=produce) and for one fetched batch of 100 messages
// handed out by one poll (request=fetch-batch), dispatching to every hook
// as the engine does (a type check per hook and event), with no Recorder
// and with one that does nothing. Divide by 100 for the cost per message:
//
//	go test -run '^$' -bench BenchmarkHookEvents -benchmem -count 6 ./sdk > /tmp/hooks.txt
//	GOFLAGS= go run golang.org/x/perf/cmd/benchstat@latest -col /metrics /tmp/hooks.txt
func BenchmarkHookEvents(b *testing.B) {
	rack := "az-a"
	meta := kgo.BrokerMetadata{NodeID: 1, Host: "127.0.0.1", Port: 9092, Rack: &rack}
	for _, rec := range []metrics.Recorder{nil, metrics.Nop{}} {
		name := "none"
		if rec != nil {
			name = "nop"
		}
		s := &session{config: config{az: "az-a", logger: slog.New(slog.DiscardHandler)}, policy: &connPolicy{}}
		if rec != nil {
			s.metrics = metrics.ProviderFunc(func(metrics.Client) metrics.Recorder { return rec })
		}
		s.startRecorder(metrics.Client{})
		wh := newEngineHooks(s, &counters{}, false, nil)
		writer := &writerHooks{counters: &counters{}, rec: s.rec, metrics: wh.metrics}
		watch := &producerWatch{rec: s.rec}
		rh := newEngineHooks(s, &counters{}, true, nil)
		hooks := func(h *engineHooks, more ...kgo.Hook) []kgo.Hook {
			hs := append([]kgo.Hook{h}, more...)
			if h.metrics != nil {
				hs = append(hs, h.metrics)
			}
			return hs
		}
		whs, rhs := hooks(wh, writer), hooks(rh)
		e2e := kgo.BrokerE2E{BytesWritten: 11_000, BytesRead: 300, TimeToWrite: time.Microsecond, ReadWait: 100 * time.Microsecond}
		request := func(hs []kgo.Hook, key int16) {
			for _, h := range hs {
				if h, ok := h.(kgo.HookBrokerWrite); ok {
					h.OnBrokerWrite(meta, key, e2e.BytesWritten, 0, e2e.TimeToWrite, nil)
				}
			}
			for _, h := range hs {
				if h, ok := h.(kgo.HookBrokerRead); ok {
					h.OnBrokerRead(meta, key, e2e.BytesRead, e2e.ReadWait, 0, nil)
				}
			}
			for _, h := range hs {
				if h, ok := h.(kgo.HookBrokerE2E); ok {
					h.OnBrokerE2E(meta, key, e2e)
				}
			}
		}
		b.Run("request=produce/metrics="+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				request(whs, produceKey)
				if rec != nil {
					watch.saw(5, 1)
				}
				for p := range int32(6) {
					for _, h := range whs {
						if h, ok := h.(kgo.HookProduceBatchWritten); ok {
							h.OnProduceBatchWritten(meta, "t", p, kgo.ProduceBatchMetrics{NumRecords: 17, UncompressedBytes: 2000, CompressedBytes: 2000})
						}
					}
				}
			}
		})
		b.Run("request=fetch-batch/metrics="+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, h := range rhs {
					if h, ok := h.(kgo.HookFetchBatchRead); ok {
						h.OnFetchBatchRead(meta, "t", 0, kgo.FetchBatchMetrics{NumRecords: 100, UncompressedBytes: 12_000, CompressedBytes: 12_000})
					}
				}
				if s.rec != nil { // Reader.poll, per partition
					s.rec.Consumed("t", 0, 100, 10_000, 0)
				}
			}
		})
	}
}
