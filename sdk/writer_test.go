package sdk_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/testpki"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

func retryBackoff(min, max time.Duration) retry.Backoff { return retry.Backoff{Min: min, Max: max} }

// faultRig is one embedded broker behind one fault-injecting proxy.
// Clients talk to the proxy (which advertises itself in Metadata), checks
// read straight from the broker.
type faultRig struct {
	broker *embedded.Cluster
	proxy  *kproxy.Proxy
	topic  string
	parts  int
	// tls is the client TLS config when the broker speaks TLS, else nil.
	tls *tls.Config
}

// write writes msgs to the rig's topic straight to the broker, with
// kafka-go's Writer.
func (rig *faultRig) write(t testing.TB, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// ownTransport is a kafka-go Transport for one test's raw kafka.Writer:
// kafka-go's DefaultTransport caches metadata per broker address, and the
// port of an embedded cluster an earlier test closed may be this test's,
// with other topics.
func ownTransport(t testing.TB) *kafka.Transport {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func newFaultRig(t testing.TB, topic string, parts int) *faultRig {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic(topic, parts))
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &faultRig{broker: c, proxy: p, topic: topic, parts: parts}
}

// newTLSFaultRig starts a TLS broker behind a raw (byte-relaying) proxy.
// The proxy cannot rewrite encrypted Metadata, so the broker's listener
// reports the proxy's address as its own: the broker advertises the proxy
// and clients never bypass it.
func newTLSFaultRig(t testing.TB, topic string, parts int) *faultRig {
	t.Helper()
	serverTLS, clientTLS := selfSignedTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := kproxy.Start(ln.Addr().String(), kproxy.Raw())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	listen := func(string, string) (net.Listener, error) {
		return advertisedListener{Listener: ln, addr: proxyAddr(p.Addr())}, nil
	}
	c := embedded.StartT(t, embedded.Topic(topic, parts),
		embedded.KfakeOptions(kfake.TLS(serverTLS), kfake.ListenFn(listen)))
	return &faultRig{broker: c, proxy: p, topic: topic, parts: parts, tls: clientTLS}
}

type proxyAddr string

func (a proxyAddr) Network() string { return "tcp" }
func (a proxyAddr) String() string  { return string(a) }

// advertisedListener accepts on Listener but reports addr as its address.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// selfSignedTLS returns a server config with a fresh certificate for
// 127.0.0.1 and a client config that trusts only its CA.
func selfSignedTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	ca := testpki.NewCA(t, "azkafka test CA")
	return testpki.ServerConfig(ca.ValidServer(t)), ca.ClientConfig()
}

// readAddr is what checks read from: the broker itself, or for TLS the
// proxy (the broker advertises it) with no fault active.
func (r *faultRig) readAddr() string {
	if r.tls != nil {
		return r.proxy.Addr()
	}
	return r.broker.Addrs()[0]
}

// checkTopic is the rig's topic as the delivery checks read it.
func (r *faultRig) checkTopic() deliverytest.Topic {
	return deliverytest.Topic{Addrs: []string{r.readAddr()}, TLS: r.tls, Name: r.topic, Partitions: r.parts}
}

// consumeAll counts every value of the rig's topic, read from the broker.
func (r *faultRig) consumeAll(t testing.TB) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return deliverytest.ConsumeAll(ctx, t, r.checkTopic())
}

// endOffsets returns the end offset of every partition, from the broker.
func (r *faultRig) endOffsets(t testing.TB) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return deliverytest.EndOffsets(ctx, t, r.checkTopic())
}

// requireCommittedToEnd checks that the group's committed offset of every
// partition is the partition's end offset.
func (r *faultRig) requireCommittedToEnd(t testing.TB, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deliverytest.RequireCommittedToEnd(ctx, t, r.checkTopic(), group)
}

// testOptions are the options every SDK client in these tests uses: an
// explicit AZ (no detection, no traffic off loopback), quick retries, a
// private connection limiter so parallel tests do not throttle each other.
func testOptions(t testing.TB, extra ...sdk.Option) []sdk.Option {
	opts := []sdk.Option{
		sdk.WithAZ("az-a"),
		sdk.WithRetry(20, 2*time.Millisecond, 50*time.Millisecond),
		sdk.WithConnLimiter(rate.NewLimiter(500, 100)),
		sdk.WithRedialBackoff(retryBackoff(5*time.Millisecond, 100*time.Millisecond)),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithGetenv(func(string) string { return "" }),
	}
	return append(opts, extra...)
}

type writerFault struct {
	name string
	// inject starts the fault on p and returns a stop function.
	inject func(p *kproxy.Proxy, injected *atomic.Int64) (stop func())
	// tls runs the case against a TLS broker behind a raw proxy.
	tls bool
	// dupsPossible: the broker may have stored a batch whose response was
	// lost. When false the test requires zero duplicates.
	dupsPossible bool
	// reopenOnRefusedDial: the fault closes the proxy's port; the writer's
	// Transport dials through a function that opens it again once a dial
	// was refused, so that every outage costs exactly one refused dial,
	// however slow the machine.
	reopenOnRefusedDial bool
	// opts are extra writer options for the case.
	opts []sdk.Option
}

// reopeningDial dials like kafka-go and, when a dial is refused, makes p
// listen again: one refused connect per outage.
func reopeningDial(t testing.TB, p *kproxy.Proxy) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if errors.Is(err, syscall.ECONNREFUSED) {
			if err := p.SetRefusing(false); err != nil {
				t.Errorf("reopening the proxy's port: %v", err)
			}
		}
		return c, err
	}
}

var writerFaults = []writerFault{
	{
		name: "close before broker sees produce",
		inject: func(p *kproxy.Proxy, n *atomic.Int64) func() {
			p.OnRequest(deliverytest.EveryNth(3, 15, kproxy.CloseBefore, n, keyProduce))
			return func() { p.OnRequest(nil) }
		},
	},
	{
		name: "close after broker handled produce",
		inject: func(p *kproxy.Proxy, n *atomic.Int64) func() {
			p.OnRequest(deliverytest.EveryNth(3, 15, kproxy.CloseAfter, n, keyProduce))
			return func() { p.OnRequest(nil) }
		},
		dupsPossible: true,
	},
	{
		name: "reset before broker sees produce",
		inject: func(p *kproxy.Proxy, n *atomic.Int64) func() {
			p.OnRequest(deliverytest.EveryNth(3, 15, kproxy.Reset, n, keyProduce))
			return func() { p.OnRequest(nil) }
		},
	},
	{
		name: "refuse connects and close live connections",
		inject: func(p *kproxy.Proxy, n *atomic.Int64) func() {
			// Every 2nd new connection is accepted and closed at once; at
			// every 3rd Produce request all connections die and the port
			// refuses connects until the writer's next dial was refused
			// (reopenOnRefusedDial). The faults follow the writer's
			// requests, not the clock, so a slow machine cannot starve it.
			var conns, outages atomic.Int64
			p.OnConnect(func(uint64) kproxy.ConnAction {
				if conns.Add(1)%2 == 0 && n.Load() < 30 {
					n.Add(1)
					return kproxy.Refuse
				}
				return kproxy.Accept
			})
			every3rd := deliverytest.EveryNth(3, 15, kproxy.CloseBefore, &outages, keyProduce)
			p.OnRequest(func(r kproxy.Request) kproxy.Action {
				act := every3rd(r)
				if act == kproxy.CloseBefore {
					n.Add(1)
					_ = p.SetRefusing(true)
					p.CloseAll()
				}
				return act
			})
			return func() { p.OnRequest(nil); p.OnConnect(nil); _ = p.SetRefusing(false) }
		},
		reopenOnRefusedDial: true,
		dupsPossible:        true, // CloseAll can cut another connection after the broker stored its batch
	},
	{
		name: "close during TLS handshake",
		tls:  true,
		inject: func(p *kproxy.Proxy, n *atomic.Int64) func() {
			// Every 2nd new connection is cut after 40 bytes of the
			// ClientHello (the client sees io.EOF, which kafka-go itself
			// does not retry), and every 100 ms all connections die so
			// that the writer has to re-dial. The proxy cannot read TLS
			// frames, so the closes are periodic; they stop after 20
			// rounds, and the case's retry budget (opts) outlasts them
			// however slow the machine, so a writer starved of whole
			// connections still ends with everything stored.
			var conns, rounds atomic.Int64
			p.OnConnect(func(uint64) kproxy.ConnAction {
				if conns.Add(1)%2 == 0 && n.Load() < 30 {
					n.Add(1)
					return kproxy.CloseAfterBytes(40)
				}
				return kproxy.Passthrough
			})
			stop := deliverytest.Every(100*time.Millisecond, func() {
				if rounds.Add(1) <= 20 {
					p.CloseAll()
				}
			})
			return func() { stop(); p.OnConnect(nil) }
		},
		opts:         []sdk.Option{sdk.WithRetry(1000, 2*time.Millisecond, 50*time.Millisecond)},
		dupsPossible: true, // CloseAll can land after the broker stored a batch
	},
}

// TestWriterDeliversThroughFaults writes through each fault, synchronously
// and asynchronously, and counts what reached the broker.
func TestWriterDeliversThroughFaults(t *testing.T) {
	for _, fault := range writerFaults {
		for _, mode := range []string{"sync", "sync-completion", "async", "at-least-once/sync", "at-least-once/async"} {
			async, completion := strings.HasSuffix(mode, "async"), mode != "sync" && mode != "at-least-once/sync"
			idempotent := !strings.HasPrefix(mode, "at-least-once")
			t.Run(fault.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				start := newFaultRig
				if fault.tls {
					start = newTLSFaultRig
				}
				rig := start(t, "faults", 3)
				var injected atomic.Int64
				stop := fault.inject(rig.proxy, &injected)

				const goroutines, calls, perCall = 2, 10, 20
				sent := deliverytest.Messages("m", goroutines*calls*perCall)
				var completed sync.Map // value -> times reported
				var completionErrs atomic.Int64
				kw := &kafka.Writer{
					Addr:         kafka.TCP(rig.proxy.Addr()),
					Topic:        rig.topic,
					Balancer:     &kafka.Hash{},
					RequiredAcks: kafka.RequireAll,
					BatchTimeout: 2 * time.Millisecond,
					WriteTimeout: 5 * time.Second,
					Async:        async,
				}
				if rig.tls != nil {
					kw.Transport = &kafka.Transport{TLS: rig.tls}
				}
				if fault.reopenOnRefusedDial {
					kw.Transport = &kafka.Transport{Dial: reopeningDial(t, rig.proxy)}
				}
				if completion {
					kw.Completion = func(msgs []kafka.Message, err error) {
						if err != nil {
							completionErrs.Add(int64(len(msgs)))
							t.Errorf("Completion error for %d messages: %v", len(msgs), err)
						}
						for _, m := range msgs {
							v, _ := completed.LoadOrStore(string(m.Value), new(atomic.Int64))
							v.(*atomic.Int64).Add(1)
						}
					}
				}
				w, err := sdk.NewWriter(kw, testOptions(t, append([]sdk.Option{sdk.WithIdempotence(idempotent)}, fault.opts...)...)...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for c := 0; c < calls; c++ {
							off := (g*calls + c) * perCall
							if err := w.WriteMessages(ctx, sent[off:off+perCall]...); err != nil {
								t.Errorf("WriteMessages: %v", err)
							}
							if async {
								time.Sleep(5 * time.Millisecond) // let faults interleave
							}
						}
					}()
				}
				wg.Wait()
				if err := w.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				stop()
				st := w.Stats()

				lost, dups := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
				t.Logf("faults injected=%d messages=%d lost=%d duplicates=%d retries=%d transient=%d",
					injected.Load(), len(sent), lost, dups, st.SDK.Retries, st.SDK.TransientErrors)
				if injected.Load() == 0 {
					t.Fatal("no fault was injected: the test proves nothing")
				}
				if lost != 0 {
					t.Errorf("%d of %d messages lost", lost, len(sent))
				}
				if idempotent && dups != 0 {
					t.Errorf("%d duplicates stored by an idempotent Writer", dups)
				}
				if !fault.dupsPossible && dups != 0 {
					t.Errorf("%d duplicates, but the broker never saw the failed requests", dups)
				}
				if st.SDK.Idempotent != idempotent {
					t.Errorf("Stats().SDK.Idempotent = %v, want %v", st.SDK.Idempotent, idempotent)
				}
				if st.SDK.Retries == 0 && st.SDK.TransientErrors == 0 {
					t.Errorf("stats show no retry (%d) and no transient error absorbed (%d) despite %d faults",
						st.SDK.Retries, st.SDK.TransientErrors, injected.Load())
				}
				if completion {
					for _, m := range sent {
						v, ok := completed.Load(string(m.Value))
						if !ok {
							t.Errorf("Completion never reported %s", m.Value)
							continue
						}
						if n := v.(*atomic.Int64).Load(); n != 1 {
							t.Errorf("Completion reported %s %d times, want once", m.Value, n)
						}
					}
				}
			})
		}
	}
}

// TestRawWriterThroughTLSHandshakeClose is the control for the TLS case
// above: kafka-go's own Writer, with its default 10 attempts, through the
// same fault. It records what kafka-go does (seen: a per-message io.EOF, a
// whole-call io.EOF from the metadata request, a hang until ctx's
// deadline, or, as often, riding through the closes on its own retries
// once they stop) and counts what it lost; it asserts only that the fault
// was injected, which is what makes the SDK case prove something.
func TestRawWriterThroughTLSHandshakeClose(t *testing.T) {
	t.Parallel()
	rig := newTLSFaultRig(t, "control", 3)
	var injected atomic.Int64
	stop := faultByName(t, "close during TLS handshake").inject(rig.proxy, &injected)
	w := &kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 2 * time.Millisecond,
		Transport:    &kafka.Transport{TLS: rig.tls},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs := deliverytest.Messages("c", 400)
	var failed int
	var firstErr error
	for off := 0; off < len(msgs) && ctx.Err() == nil; off += 20 {
		if err := w.WriteMessages(ctx, msgs[off:off+20]...); err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	stop()
	_ = w.Close()
	lost, dups := deliverytest.LostAndDuplicated(msgs, rig.consumeAll(t))
	t.Logf("raw kafka-go through %d handshake closes: %d of 20 calls failed (first: %v); %d of %d messages lost, %d duplicates",
		injected.Load(), failed, firstErr, lost, len(msgs), dups)
	if injected.Load() == 0 {
		t.Fatal("no handshake was cut: the fault did not happen")
	}
}

func faultByName(t testing.TB, name string) writerFault {
	for _, f := range writerFaults {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fault %q", name)
	return writerFault{}
}

// failPartitions rewrites Produce responses so that the given partitions
// answer with code (the broker still stored the records).
func failPartitions(t testing.TB, p *kproxy.Proxy, code int16, parts ...int32) {
	p.OnResponse(kproxy.FailProduce(code, parts, func(err error) { t.Errorf("decoding produce response: %v", err) }))
}

// TestWriterErrors checks what WriteMessages returns when delivery fails:
// a kafka.WriteErrors aligned with the input, permanent errors returned
// without resending, the delivery budget and ctx honoured, and
// errors.Is/As reaching the cause.
func TestWriterErrors(t *testing.T) {
	const topicAuthorizationFailed = 29 // not retriable
	partitionOf := func(m kafka.Message) int { return (&kafka.Hash{}).Balance(m, 0, 1, 2) }
	for _, tc := range []struct {
		name string
		// produce decides the fate of the nth Produce request (1-based).
		produce func(n int64) kproxy.Action
		// failParts answer every Produce with TopicAuthorizationFailed.
		failParts    []int32
		retry        sdk.Option
		timeout      time.Duration
		writeTimeout time.Duration
		check        func(t *testing.T, msgs []kafka.Message, r writerErrorsResult)
	}{
		{
			name:      "permanent error on every partition is not resent",
			failParts: []int32{0, 1, 2},
			check: func(t *testing.T, msgs []kafka.Message, r writerErrorsResult) {
				werrs := requireWriteErrors(t, r.err, len(msgs))
				for i, e := range werrs {
					if !errors.Is(e, kafka.TopicAuthorizationFailed) {
						t.Errorf("message %d: error %v, want kafka.TopicAuthorizationFailed", i, e)
					}
				}
				// One broker: at most one request per partition's batch
				// (a synchronous call goes out at once, so the first
				// batch may leave before the others are cut).
				if r.produces > 3 || r.st.SDK.Retries != 0 {
					t.Errorf("%d produce requests and %d retries, want at most 3 and 0", r.produces, r.st.SDK.Retries)
				}
			},
		},
		{
			name: "transient close on the first produces, permanent error on partition 1",
			produce: func(n int64) kproxy.Action {
				if n <= 2 {
					return kproxy.CloseBefore
				}
				return kproxy.Forward
			},
			failParts: []int32{1},
			check: func(t *testing.T, msgs []kafka.Message, r writerErrorsResult) {
				werrs := requireWriteErrors(t, r.err, len(msgs))
				for i, e := range werrs {
					if wantErr := partitionOf(msgs[i]) == 1; wantErr != errors.Is(e, kafka.TopicAuthorizationFailed) || !wantErr && e != nil {
						t.Errorf("message %d (partition %d): error %v", i, partitionOf(msgs[i]), e)
					}
				}
				if r.st.SDK.Retries == 0 {
					t.Error("no retry after the transient closes")
				}
			},
		},
		{
			// The budget is attempts × (WriteTimeout + backoff max),
			// at least 1 s: here 3 × (300ms + 5ms), so 1 s.
			name:         "delivery budget runs out",
			produce:      func(int64) kproxy.Action { return kproxy.CloseBefore },
			retry:        sdk.WithRetry(3, time.Millisecond, 5*time.Millisecond),
			writeTimeout: 300 * time.Millisecond,
			check: func(t *testing.T, msgs []kafka.Message, r writerErrorsResult) {
				werrs := requireWriteErrors(t, r.err, len(msgs))
				for i, e := range werrs {
					if !errors.Is(e, kgo.ErrRecordTimeout) || !errors.Is(e, context.DeadlineExceeded) || !strings.Contains(fmt.Sprint(e), "delivery budget (1s)") {
						t.Errorf("message %d: error %v, want kgo.ErrRecordTimeout naming the 1s budget", i, e)
					}
				}
				if r.elapsed < 900*time.Millisecond || r.elapsed > 10*time.Second || r.st.SDK.Retries == 0 {
					t.Errorf("returned after %v with %d retries; want about the 1s budget, retries counted", r.elapsed, r.st.SDK.Retries)
				}
			},
		},
		{
			name:    "ctx ends during retries",
			produce: func(int64) kproxy.Action { return kproxy.CloseBefore },
			retry:   sdk.WithRetry(1000, 20*time.Millisecond, 50*time.Millisecond),
			timeout: 300 * time.Millisecond,
			check: func(t *testing.T, msgs []kafka.Message, r writerErrorsResult) {
				// kafka-go's shape: the call's error is ctx's (no
				// kafka.WriteErrors); its text names the last cause.
				var werrs kafka.WriteErrors
				if !errors.Is(r.err, context.DeadlineExceeded) || errors.As(r.err, &werrs) || !strings.Contains(fmt.Sprint(r.err), "last error:") {
					t.Errorf("WriteMessages returned %v, want context.DeadlineExceeded naming the last error, not kafka.WriteErrors", r.err)
				}
				if errors.Is(r.err, io.EOF) {
					t.Errorf("WriteMessages returned %v, which matches io.EOF as kafka-go's ctx error does not", r.err)
				}
				if r.elapsed > 2*time.Second {
					t.Errorf("WriteMessages returned %v after a 300ms deadline", r.elapsed)
				}
			},
		},
	} {
		for _, idempotent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/idempotent=%v", tc.name, idempotent), func(t *testing.T) {
				t.Parallel()
				rig := newFaultRig(t, "errors", 3)
				opts := testOptions(t, sdk.WithIdempotence(idempotent))
				if tc.retry != nil {
					opts = append(opts, tc.retry)
				}
				w, err := sdk.NewWriter(&kafka.Writer{
					Addr:         kafka.TCP(rig.proxy.Addr()),
					Topic:        rig.topic,
					Balancer:     &kafka.Hash{},
					RequiredAcks: kafka.RequireAll,
					BatchTimeout: time.Millisecond,
					WriteTimeout: tc.writeTimeout,
				}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				msgs := deliverytest.Messages("e", 30)
				timeout := tc.timeout
				if timeout == 0 {
					timeout = 20 * time.Second
				}
				var produces atomic.Int64
				rig.proxy.OnRequest(func(r kproxy.Request) kproxy.Action {
					if r.Key != 0 {
						return kproxy.Forward
					}
					n := produces.Add(1)
					if tc.produce == nil {
						return kproxy.Forward
					}
					return tc.produce(n)
				})
				if tc.failParts != nil {
					failPartitions(t, rig.proxy, topicAuthorizationFailed, tc.failParts...)
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				start := time.Now()
				err = w.WriteMessages(ctx, msgs...)
				st := w.Stats()
				if st.SDK.Idempotent != idempotent {
					t.Fatalf("Stats().SDK.Idempotent = %v, want %v", st.SDK.Idempotent, idempotent)
				}
				tc.check(t, msgs, writerErrorsResult{err: err, produces: produces.Load(), st: st, elapsed: time.Since(start)})
				// Close waits for what is still queued (up to the
				// delivery budget): let it through.
				rig.proxy.OnRequest(nil)
			})
		}
	}
}

// writerErrorsResult is what TestWriterErrors checks after a write.
type writerErrorsResult struct {
	err      error
	produces int64 // Produce requests the proxy saw
	st       sdk.WriterStats
	elapsed  time.Duration
}

func requireWriteErrors(t *testing.T, err error, n int) kafka.WriteErrors {
	t.Helper()
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) {
		t.Fatalf("WriteMessages returned %v (%T), want kafka.WriteErrors", err, err)
	}
	if len(werrs) != n {
		t.Fatalf("kafka.WriteErrors has %d entries for %d messages", len(werrs), n)
	}
	return werrs
}

// TestWriterAsyncFailureIsLogged: in async mode without Completion, a
// message that fails for good is not silent: one warning per call and
// partition names the topic, the partition and the cause.
func TestWriterAsyncFailureIsLogged(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "asyncfail", 2)
	failPartitions(t, rig.proxy, 29, 1) // TOPIC_AUTHORIZATION_FAILED, not retried
	var logs deliverytest.LogBuffer
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     byKey,
		BatchTimeout: time.Millisecond,
		Async:        true,
	}, testOptions(t, sdk.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))...)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []kafka.Message{
		{Key: []byte("p0"), Value: []byte("a")}, {Key: []byte("p1"), Value: []byte("b")},
		{Key: []byte("p1"), Value: []byte("c")}, {Key: []byte("p0"), Value: []byte("d")},
	}
	if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "async write failed for good"); n != 1 ||
		!strings.Contains(out, "topic=asyncfail") || !strings.Contains(out, "partition=1") ||
		!strings.Contains(out, "messages=2") || !strings.Contains(out, "[29] Topic Authorization Failed") {
		t.Fatalf("want one warning naming topic, partition 1, 2 messages and the cause; log:\n%s", out)
	}
	// As kafka-go's, Messages counts the messages written, stored or not.
	if st := w.Stats(); st.Errors != 1 || st.Messages != 4 {
		t.Errorf("Stats: Errors %d, Messages %d; want 1 failed group, 4 messages written", st.Errors, st.Messages)
	}
}

// TestWriterSyncCallIgnoresBatchTimeout: a synchronous call of 10
// messages, with kafka-go's default BatchTimeout (1 s), returns as soon as
// the broker answered, at every acks level. (The target is 5 ms on
// loopback; the bound here leaves room for a loaded machine.)
func TestWriterSyncCallIgnoresBatchTimeout(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "latency", 3)
	for _, acks := range []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireOne, kafka.RequireNone} {
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: acks}, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		msgs := deliverytest.Messages("lat-"+acks.String(), 10)
		if err := w.WriteMessages(testCtx(t), msgs...); err != nil { // connect, metadata, producer ID
			t.Fatal(err)
		}
		var worst time.Duration
		for range 20 {
			start := time.Now()
			if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
				t.Fatal(err)
			}
			worst = max(worst, time.Since(start))
		}
		w.Close()
		t.Logf("acks=%s: slowest of 20 synchronous calls of 10 messages: %v", acks, worst)
		if worst > 300*time.Millisecond {
			t.Errorf("acks=%s: a synchronous call took %v: it waited for BatchTimeout (1s)", acks, worst)
		}
	}
}

// TestWriterBalancersPlaceLikeKafkaGo: keyed messages land in the
// partition kafka-go's balancer picks for them among all partitions;
// LeastBytes and RoundRobin spread keyless messages over every partition.
func TestWriterBalancersPlaceLikeKafkaGo(t *testing.T) {
	t.Parallel()
	const parts = 5
	rig := newFaultRig(t, "balance", parts)
	for _, tc := range []struct {
		name string
		b    func() kafka.Balancer
	}{
		{"Hash", func() kafka.Balancer { return &kafka.Hash{} }},
		{"ReferenceHash", func() kafka.Balancer { return &kafka.ReferenceHash{} }},
		{"Murmur2", func() kafka.Balancer { return kafka.Murmur2Balancer{} }},
		{"CRC32", func() kafka.Balancer { return kafka.CRC32Balancer{} }},
		{"LeastBytes", func() kafka.Balancer { return &kafka.LeastBytes{} }},
		{"RoundRobin (default)", func() kafka.Balancer { return nil }},
	} {
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
			Balancer: tc.b()}, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		msgs := deliverytest.Messages(tc.name, 50)
		before := rig.endOffsets(t)
		if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
			t.Fatal(err)
		}
		w.Close()
		after := rig.endOffsets(t)
		stored := map[int]int64{}
		for p := range parts {
			stored[p] = after[p] - before[p]
		}
		ref := tc.b()
		if ref == nil || tc.name == "LeastBytes" {
			for p, n := range stored {
				if n == 0 {
					t.Errorf("%s: partition %d got none of 50 messages: %v", tc.name, p, stored)
				}
			}
			continue
		}
		want := map[int]int64{}
		for _, m := range msgs {
			want[ref.Balance(m, 0, 1, 2, 3, 4)]++
		}
		if fmt.Sprint(want) != fmt.Sprint(stored) {
			t.Errorf("%s: stored per partition %v, kafka-go's balancer puts them %v", tc.name, stored, want)
		}
	}
}

// TestWriterBudgetCountsFromHandOver: a message's delivery budget starts
// when it is handed over, whatever its Time: a Time far in the past is
// written (a replay's), and one in the future still fails when the budget
// after hand-over runs out instead of never.
func TestWriterBudgetCountsFromHandOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		at    time.Time
		fails bool // every produce is closed before the broker sees it
	}{
		{name: "a Time years ago is written", at: time.Now().AddDate(-3, 0, 0)},
		{name: "a Time an hour ahead fails at the end of its budget", at: time.Now().Add(time.Hour), fails: true},
		{name: "a Time years ago fails at the end of its budget, not at once", at: time.Now().AddDate(-3, 0, 0), fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "budget", 1)
			if tc.fails {
				rig.proxy.OnRequest(func(r kproxy.Request) kproxy.Action {
					if r.Key == 0 {
						return kproxy.CloseBefore
					}
					return kproxy.Forward
				})
			}
			// A budget of 1 s: 3 × (300ms + 5ms), at least 1 s.
			w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
				WriteTimeout: 300 * time.Millisecond}, testOptions(t, sdk.WithRetry(3, time.Millisecond, 5*time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err = w.WriteMessages(ctx, kafka.Message{Value: []byte("timed"), Time: tc.at})
			took := time.Since(start)
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
			if !tc.fails {
				if err != nil {
					t.Fatalf("WriteMessages: %v", err)
				}
				got := deliverytest.PartitionValues(ctx, t, deliverytest.Topic{Addrs: rig.broker.Addrs(), Name: rig.topic, Partitions: 1})
				if len(got[0]) != 1 {
					t.Fatalf("stored %v, want the message once", got)
				}
				return
			}
			werrs := requireWriteErrors(t, err, 1)
			if !errors.Is(werrs[0], kgo.ErrRecordTimeout) || ctx.Err() != nil {
				t.Fatalf("WriteMessages: %v; want the delivery budget's end, before the call's ctx", err)
			}
			// The budget's end comes after the budget, not at once: its
			// Context is made when the message is handed over.
			if took < time.Second {
				t.Fatalf("the budget ended after %v, before the 1s budget", took)
			}
		})
	}
}

// countingBalancer is RoundRobin that counts its calls, panics for the
// key "panic" and chooses no partition for the key "none".
type countingBalancer struct {
	calls atomic.Int64
	rr    kafka.RoundRobin
}

func (b *countingBalancer) Balance(m kafka.Message, partitions ...int) int {
	b.calls.Add(1)
	switch string(m.Key) {
	case "panic":
		panic("balancer panics")
	case "none":
		return len(partitions)
	}
	return b.rr.Balance(m, partitions...)
}

// TestWriterBalancerMisbehaves: a Balancer that panics panics the call,
// as in kafka-go, and the Writer goes on and closes at once (it does not
// wait for the call, whose messages never reached the engine); one that
// chooses no partition fails its message, and runs once for it, as
// kafka-go's.
func TestWriterBalancerMisbehaves(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("misbehaves", 3))
	b := &countingBalancer{}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "misbehaves", Balancer: b,
		RequiredAcks: kafka.RequireAll, WriteTimeout: time.Hour}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("a")}); err != nil {
		t.Fatalf("WriteMessages: %v", err)
	}
	p := panicOf(func() { _ = w.WriteMessages(ctx, kafka.Message{Key: []byte("b")}, kafka.Message{Key: []byte("panic")}) })
	if p != "balancer panics" {
		t.Fatalf("WriteMessages with a panicking Balancer panicked with %v, want the Balancer's panic", p)
	}
	before := b.calls.Load()
	err = w.WriteMessages(ctx, kafka.Message{Key: []byte("c")}, kafka.Message{Key: []byte("none")})
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != 2 || werrs[0] != nil || werrs[1] == nil {
		t.Fatalf("WriteMessages with a message the Balancer places nowhere: %v, want kafka.WriteErrors failing the second", err)
	}
	if n := b.calls.Load() - before; n != 2 {
		t.Errorf("the Balancer ran %d times for 2 messages, want 2 (kafka-go runs it once a message)", n)
	}
	// With the call of the panic still counted, Close would wait the
	// WriteTimeout, an hour.
	done := make(chan error, 1)
	go func() { done <- w.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close still waits after a minute: it waits for the call whose Balancer panicked")
	}
}

// TestWriterCompletion: Completion runs off the engine's goroutine, one
// partition's after another's in parallel: a Completion that writes
// synchronously to another partition returns (it deadlocked while every
// Completion ran on the goroutine that reports outcomes), a synchronous
// call returns after its Completion, and Close returns once every
// acknowledged message of async calls was reported.
func TestWriterCompletion(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "completion", 2)
	toKey := kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return int(m.Key[0] - '0') })
	t.Run("sync call from Completion", func(t *testing.T) {
		var w *sdk.Writer
		inner := make(chan error, 1)
		var reported atomic.Int32
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
			Balancer: toKey, Completion: func(msgs []kafka.Message, err error) {
				reported.Add(int32(len(msgs)))
				if string(msgs[0].Value) == "outer" {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					inner <- w.WriteMessages(ctx, kafka.Message{Key: []byte("1"), Value: []byte("inner")})
				}
			}}, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.WriteMessages(testCtx(t), kafka.Message{Key: []byte("0"), Value: []byte("outer")}); err != nil {
			t.Fatalf("outer call: %v", err)
		}
		if err := <-inner; err != nil {
			t.Fatalf("a synchronous call to another partition from Completion: %v", err)
		}
		if n := reported.Load(); n != 2 {
			t.Fatalf("Completion reported %d messages when both calls returned, want 2", n)
		}
	})
	t.Run("Close waits for Completion", func(t *testing.T) {
		var reported atomic.Int32
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.broker.Addrs()...), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
			Balancer: toKey, Async: true, BatchTimeout: time.Millisecond, Completion: func(msgs []kafka.Message, err error) {
				time.Sleep(20 * time.Millisecond)
				reported.Add(int32(len(msgs)))
			}}, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if err := w.WriteMessages(testCtx(t), kafka.Message{Key: []byte{byte('0' + i%2)}, Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if n := reported.Load(); n != 50 {
			t.Fatalf("Completion had reported %d of 50 messages when Close returned", n)
		}
	})
}

// TestWriterCompletionPerTopicPartition: a call's messages are reported
// per topic and partition: a message to b/0 of a call whose a/0 message
// waits at the broker is reported once acknowledged, before a later
// call's message to b/0, and never with a/0's.
func TestWriterCompletionPerTopicPartition(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Brokers(2), embedded.Topic("a", 1), embedded.Topic("b", 1))
	k := c.Kfake()
	if err := k.MoveTopicPartition("a", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := k.MoveTopicPartition("b", 0, 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports [][]string
	zReported := make(chan struct{})
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), RequiredAcks: kafka.RequireAll,
		Async: true, BatchTimeout: time.Millisecond, Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			var r []string
			for _, m := range msgs {
				r = append(r, m.Topic+":"+string(m.Value))
				if string(m.Value) == "z" {
					close(zReported)
				}
			}
			reports = append(reports, r)
		}}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Both topics' metadata first.
	if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: "a", Value: []byte("wa")}, kafka.Message{Topic: "b", Value: []byte("wb")}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	k.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if k.CurrentNode() == 0 { // a/0's leader holds its produce requests
			k.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: "a", Value: []byte("x")}, kafka.Message{Topic: "b", Value: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(testCtx(t), kafka.Message{Topic: "b", Value: []byte("z")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-zReported:
	case <-testCtx(t).Done():
		t.Fatal("b:z never reported while a/0 waits")
	}
	releaseOnce.Do(func() { close(release) })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var order []string
	for _, r := range reports {
		for _, m := range r {
			if strings.HasPrefix(m, "a:") && slices.ContainsFunc(r, func(m string) bool { return strings.HasPrefix(m, "b:") }) {
				t.Errorf("one Completion call reported %v: messages of two topics", r)
			}
			order = append(order, m)
		}
	}
	if y, z := slices.Index(order, "b:y"), slices.Index(order, "b:z"); y < 0 || y > z {
		t.Errorf("reported %v: b:y (acknowledged first) after b:z", order)
	}
}

// TestWriterAsyncFullBufferHonoursCtx: an async call that finds the
// engine's buffer full (the broker holds every produce request) waits for
// room only as long as its ctx, and then stores nothing.
func TestWriterAsyncFullBufferHonoursCtx(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("full", 1))
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "full", RequiredAcks: kafka.RequireAll,
		Async: true, BatchTimeout: time.Millisecond}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: []byte("first")}); err != nil { // the topic's metadata
		t.Fatal(err)
	}
	release := make(chan struct{})
	k := c.Kfake()
	k.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		<-release
		return nil, nil, false
	})
	batch := make([]kafka.Message, 1000)
	for i := range batch {
		batch[i] = kafka.Message{Value: []byte("v")}
	}
	for range 49 {
		if err := w.WriteMessages(testCtx(t), batch...); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- w.WriteMessages(ctx, append(slices.Clone(batch[:999]), kafka.Message{Value: []byte("refused")})...)
	}()
	<-ctx.Done()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("async call with the buffer full = %v, want context.DeadlineExceeded once its ctx ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("async call with the buffer full still waiting 5 s after its ctx ended")
	}
	close(release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	counts := deliverytest.ConsumeAll(testCtx(t), t, deliverytest.Topic{Addrs: c.Addrs(), Name: "full", Partitions: 1})
	if counts["refused"] != 0 || counts["v"] != 49_000 || counts["first"] != 1 {
		t.Fatalf("stored %d of the 49,000 before, %d of the refused call's last message, want all and none", counts["v"], counts["refused"])
	}
}

// TestWriterResendAfterPartitionsChange: a record the broker refused as
// corrupt after its topic gained partitions is resent to the partition it
// was balanced to (not the stateful Balancer's next answer), and every
// message of the async call is reported before Close returns.
func TestWriterResendAfterPartitionsChange(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Brokers(1), embedded.Topic("grow", 2))
	var reported atomic.Int32
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "grow", RequiredAcks: kafka.RequireAll,
		Balancer: &kafka.RoundRobin{}, BatchBytes: 450, Async: true, BatchTimeout: 50 * time.Millisecond, WriteTimeout: 5 * time.Second,
		Transport: &kafka.Transport{MetadataTTL: 300 * time.Millisecond},
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				t.Errorf("Completion of %d messages: %v", len(msgs), err)
			}
			reported.Add(int32(len(msgs)))
		}},
		sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }), sdk.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Key: []byte("first"), Value: make([]byte, 10)}); err != nil {
		t.Fatal(err)
	}
	for reported.Load() == 0 { // the first produce request answered
		select {
		case <-testCtx(t).Done():
			t.Fatal("the first message was not reported")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	grow := kmsg.NewPtrCreatePartitionsRequest()
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "grow", 4
	grow.Topics = append(grow.Topics, gt)
	if _, err := grow.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * 300 * time.Millisecond) // the Writer's metadata, refreshed every 300 ms, has the 4 partitions
	refuseAsCorrupt(c, 2)
	msgs := make([]kafka.Message, 6)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte{byte('a' + i)}, Value: make([]byte, 300)}
	}
	if err := w.WriteMessages(testCtx(t), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := reported.Load(); n != 7 {
		t.Fatalf("Completion reported %d of 7 messages when Close returned", n)
	}
}

// refuseAsCorrupt makes c answer its nth Produce request from now on
// with CORRUPT_MESSAGE for every partition, storing nothing of it, and
// returns a channel closed once it did.
func refuseAsCorrupt(c *embedded.Cluster, nth int32) <-chan struct{} {
	var produces atomic.Int32
	refused := make(chan struct{})
	k := c.Kfake()
	k.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if produces.Add(1) != nth {
			return nil, nil, false
		}
		req := r.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.CorruptMessage.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		close(refused)
		return resp, nil, true
	})
	return refused
}

// TestWriterCompletionOrderThroughCorruptResend: the messages of an async
// call acknowledged before another of its messages in the same partition
// was refused as corrupt are reported before the outcomes that partition
// gets later (a later call's), not after the refused one's resend.
func TestWriterCompletionOrderThroughCorruptResend(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Brokers(1), embedded.Topic("ord", 1))
	var mu sync.Mutex
	var order []string
	first := make(chan struct{})
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "ord", RequiredAcks: kafka.RequireAll,
		BatchBytes: 450, Async: true, BatchTimeout: 20 * time.Millisecond, WriteTimeout: 5 * time.Second,
		Completion: func(msgs []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				order = append(order, fmt.Sprintf("%s@%d", m.Value[:2], m.Offset))
				if len(order) == 1 {
					close(first)
				}
			}
		}},
		append(testOptions(t), sdk.WithRetryPolicy(retry.Policy{MaxAttempts: 10,
			Backoff: retry.Backoff{Min: 2 * time.Second, Max: 2 * time.Second, Rand: func() float64 { return 0.999 }}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	val := func(s string) []byte { b := make([]byte, 300); copy(b, s); return b }
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: val("w0")}); err != nil { // the topic's metadata
		t.Fatal(err)
	}
	<-first
	refused := refuseAsCorrupt(c, 2)
	// One call, one batch per message (BatchBytes 450): m2's is refused.
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: val("m1")}, kafka.Message{Value: val("m2")}); err != nil {
		t.Fatal(err)
	}
	<-refused
	for w.Stats().SDK.Retries == 0 { // m2 is queued to be resent, after the backoff
		if err := retry.SleepContext(testCtx(t), 5*time.Millisecond); err != nil {
			t.Fatal("m2 was not queued to be resent")
		}
	}
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: val("m3")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// (m2, resent after the backoff, is stored after m3: see Writer.)
	if len(order) != 4 || order[1] != "m1@1" {
		t.Fatalf("reported %v, want w0, then m1 (acknowledged first, at offset 1) before m3, and m2", order)
	}
}

// TestWriterTopicDeletedAndMadeAgain runs kafka-go's Writer beside the
// SDK's through a topic's deletion and creation again: once a call's
// messages failed as unknown, the next call fails with
// kafka.UnknownTopicOrPartition itself (as kafka-go's does once its
// metadata says so; it failed with the messages' errors for good), and
// once the topic is made again the Writer writes to it (the engine
// refused the new topic's ID for good).
func TestWriterTopicDeletedAndMadeAgain(t *testing.T) {
	for _, impl := range []string{"kafka-go", "sdk"} {
		t.Run(impl, func(t *testing.T) {
			c := embedded.StartT(t, embedded.Topic("again", 1))
			kw := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "again", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
				Transport: ownTransport(t)}
			var w interface {
				WriteMessages(context.Context, ...kafka.Message) error
				Close() error
			} = kw
			if impl == "sdk" {
				sw, err := sdk.NewWriter(kw, testOptions(t)...)
				if err != nil {
					t.Fatal(err)
				}
				w = sw
			}
			defer w.Close()
			ctx := testCtx(t)
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("before")}); err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteTopic(ctx, "again"); err != nil {
				t.Fatal(err)
			}
			first := w.WriteMessages(ctx, kafka.Message{Value: []byte("deleted-1")})
			second := w.WriteMessages(ctx, kafka.Message{Value: []byte("deleted-2")})
			t.Logf("after the deletion: %v; then %v", first, second)
			if impl == "sdk" && (first == nil || !errors.Is(second, kafka.UnknownTopicOrPartition)) {
				t.Fatalf("after the deletion: %v, then %v; want an error, then one matching kafka.UnknownTopicOrPartition", first, second)
			}
			if err := c.CreateTopic(ctx, "again", 1); err != nil {
				t.Fatal(err)
			}
			err := w.WriteMessages(ctx, kafka.Message{Value: []byte("again")})
			t.Logf("once made again: %v", err)
			if impl == "sdk" && err != nil {
				t.Fatalf("once the topic was made again: %v", err)
			}
			if impl == "sdk" {
				got := readToEnd(t, c, "again", 1, false)[0]
				if !slices.Equal(got, []string{"again"}) {
					t.Fatalf("the topic made again holds %q, want [again]", got)
				}
			}
		})
	}
}

// TestWriterBudgetEndsWithBrokerGone: the broker goes away (its address
// refuses connections) after the Writer reached it; the call's messages
// fail at the end of their delivery budget with an error matching
// kgo.ErrRecordTimeout and context.DeadlineExceeded that names the budget
// and the engine's last error. Before, the engine's error (the refused
// dial) came alone when the engine failed the records with it.
func TestWriterBudgetEndsWithBrokerGone(t *testing.T) {
	t.Parallel()
	for _, completion := range []bool{false, true} {
		t.Run(fmt.Sprintf("completion=%v", completion), func(t *testing.T) {
			t.Parallel()
			rig := newFaultRig(t, "budget-gone", 1)
			var reports atomic.Int64 // Completion's calls with an error
			cfg := &kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
				WriteTimeout: 300 * time.Millisecond, Transport: ownTransport(t)}
			if completion {
				cfg.Completion = func(_ []kafka.Message, err error) {
					if err != nil {
						reports.Add(1)
					}
				}
			}
			w, err := sdk.NewWriter(cfg, testOptions(t, sdk.WithRetry(3, time.Millisecond, 5*time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx := testCtx(t)
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("a")}); err != nil {
				t.Fatal(err)
			}
			w.Stats()
			if err := rig.proxy.SetRefusing(true); err != nil {
				t.Fatal(err)
			}
			rig.proxy.ResetAll()
			msgs := []kafka.Message{{Value: []byte("b")}, {Value: []byte("c")}}
			werrs := requireWriteErrors(t, w.WriteMessages(ctx, msgs...), len(msgs))
			for i, e := range werrs {
				if !errors.Is(e, kgo.ErrRecordTimeout) || !errors.Is(e, context.DeadlineExceeded) || !strings.Contains(fmt.Sprint(e), "delivery budget (1s)") {
					t.Errorf("message %d: error %v, want kgo.ErrRecordTimeout and context.DeadlineExceeded naming the 1s budget", i, e)
				}
			}
			if ctx.Err() != nil {
				t.Fatal("the call waited for its ctx, not the budget")
			}
			// One outcome for the partition's messages: one error in
			// Stats, one Completion call (kafka-go's: its failed batch).
			if got := w.Stats().Errors; got != 1 {
				t.Errorf("Stats().Errors %d, want 1 (one partition failed)", got)
			}
			if completion && reports.Load() != 1 {
				t.Errorf("Completion called %d times with the error, want once for the partition's messages", reports.Load())
			}
		})
	}
}
