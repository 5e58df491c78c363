package sdk_test

// Misconfiguration fails fast: before a client ever reached its cluster,
// a bootstrap address no retry fixes ends the Writer's and the Reader's
// call on its own, naming the address and the cause; refusals end it
// after the bootstrap timeout; once a broker answered, the clients ride
// through refusals instead. (The embedded broker closes the connection on
// a SASL mechanism it lacks instead of answering UNSUPPORTED_SASL_MECHANISM
// as Kafka does; the conformance suite covers that case on Kafka 4.3.1,
// TestSDKSASLSSL.)

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/hostile"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/logwatch"
	"github.com/azkafka/azkafka/sdk"
)

// failFastPatience is the ctx of a call that must end on its own: far
// beyond what any of these takes (milliseconds), and beyond the bootstrap
// timeout these clients get, so that a call ending before it did not wait
// for a timeout of any kind.
const (
	failFastPatience = 30 * time.Second
	failFastBoot     = time.Minute
)

// closingListener accepts connections and closes each after reading 4
// bytes: a plaintext Kafka listener reading a TLS ClientHello as a frame
// size it refuses.
func closingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.ReadFull(c, make([]byte, 4))
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// badBootstrap reports whether err is the *BootstrapError of a server
// whose bytes are not a Kafka response (ErrBadResponse).
func badBootstrap(err error) bool {
	var be *sdk.BootstrapError
	return errors.Is(err, sdk.ErrBadResponse) && errors.As(err, &be)
}

func hostileAddr(t *testing.T, c hostile.Case) string {
	t.Helper()
	s, err := hostile.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr()
}

// TestMisconfigurationFailsFast: each misconfiguration a retry cannot fix
// ends WriteMessages and ReadMessage on their own, with an error that
// names the address and the cause.
func TestMisconfigurationFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name string
		// addr starts the endpoint; tls and sasl are the client's.
		addr  func(t *testing.T) string
		tls   *tls.Config
		cause string // in the error, with the address
		is    func(error) bool
	}{
		{name: "unknown host", addr: func(*testing.T) string { return "no-such-host.invalid:9092" }, cause: "no such host",
			is: func(err error) bool {
				var d *net.DNSError
				var be *sdk.BootstrapError
				return errors.As(err, &d) && errors.As(err, &be)
			}},
		{name: "unknown host without a port", addr: func(*testing.T) string { return "no-such-host.invalid" }, cause: "no such host",
			is: func(err error) bool {
				var d *net.DNSError
				var be *sdk.BootstrapError
				return errors.As(err, &d) && errors.As(err, &be)
			}},
		{name: "TLS against a plaintext port", addr: closingListener, tls: &tls.Config{}, cause: "plaintext listener"},
		{name: "plaintext against a TLS port", addr: func(t *testing.T) string { return hostileAddr(t, hostile.TLSAlert) },
			cause: "a TLS record on a plaintext connection", is: badBootstrap},
		{name: "not a Kafka server", addr: func(t *testing.T) string { return hostileAddr(t, hostile.HTTP400) },
			cause: "not a Kafka broker", is: badBootstrap},
		{name: "a broken response", addr: func(t *testing.T) string { return hostileAddr(t, hostile.MetadataBomb) },
			cause: "malformed Metadata", is: badBootstrap},
		{name: "a broken handshake", addr: func(t *testing.T) string { return hostileAddr(t, hostile.RandomBody) },
			cause: "malformed ApiVersions", is: badBootstrap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tc.addr(t)
			check := func(who string, err error, took time.Duration) {
				t.Helper()
				t.Logf("%s: %v after %v", who, err, took.Round(time.Millisecond))
				switch {
				case err == nil:
					t.Fatalf("%s: no error", who)
				case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
					t.Fatalf("%s: waited for its ctx: %v", who, err)
				case !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.cause)) || !strings.Contains(err.Error(), addrHost(addr)):
					t.Fatalf("%s: %v: want the address %s and %q", who, err, addr, tc.cause)
				case tc.is != nil && !tc.is(err):
					t.Fatalf("%s: %v: errors.Is/As does not see the cause", who, err)
				}
			}
			opts := testOptions(t, sdk.WithBootstrapTimeout(failFastBoot))
			tr := &kafka.Transport{TLS: tc.tls}
			w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addr), Topic: "t", RequiredAcks: kafka.RequireAll, Transport: tr}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), failFastPatience)
			defer cancel()
			start := time.Now()
			err = w.WriteMessages(ctx, kafka.Message{Value: []byte("v")})
			check("Writer", err, time.Since(start))
			closed(t, "Writer", w.Close, 10*time.Second) // WriteTimeout's default

			d := &kafka.Dialer{TLS: tc.tls}
			for _, group := range []string{"", "g"} {
				cfg := kafka.ReaderConfig{Brokers: []string{addr}, Topic: "t", GroupID: group, Dialer: d}
				r, err := sdk.NewReader(cfg, opts...)
				if err != nil {
					t.Fatal(err)
				}
				start = time.Now()
				_, err = r.ReadMessage(ctx)
				check("Reader (group "+group+")", err, time.Since(start))
				closed(t, "Reader (group "+group+")", r.Close, sdk.ReaderCloseTimeout)
			}
		})
	}
}

// closed calls a client's Close and checks that it returned within its
// documented bound (a hang detector: it takes milliseconds).
func closed(t *testing.T, who string, close func() error, bound time.Duration) {
	t.Helper()
	start := time.Now()
	err := close()
	took := time.Since(start)
	t.Logf("%s: Close: %v after %v", who, err, took.Round(time.Millisecond))
	if took > bound {
		t.Errorf("%s: Close took %v, beyond its bound %v", who, took, bound)
	}
}

func addrHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// slowMechanism is SASL PLAIN whose first step takes delay (a mechanism
// that fetches a token).
type slowMechanism struct {
	plain.Mechanism
	delay time.Duration
}

func (m slowMechanism) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	time.Sleep(m.delay)
	return m.Mechanism.Start(ctx)
}

// TestSlowHandshakeIsNotSilence: a broker that answers (ApiVersions, the
// SASL handshake) is not silent: a client whose own SASL step takes
// longer than the bootstrap timeout still reaches its cluster, as it did
// when the timeout ran only from failures.
func TestSlowHandshakeIsNotSilence(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	const boot = 200 * time.Millisecond
	mech := slowMechanism{Mechanism: plain.Mechanism{Username: "admin", Password: "secret"}, delay: 4 * boot}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(k.ListenAddrs()...), Topic: "t", RequiredAcks: kafka.RequireAll,
		Transport: &kafka.Transport{SASL: mech}}, testOptions(t, sdk.WithBootstrapTimeout(boot))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: []byte("v")}); err != nil {
		t.Fatalf("WriteMessages through a slow SASL step: %v", err)
	}
}

// TestSilentBootstrapGivesUpAfterTheTimeout: a bootstrap address that
// takes connections and never answers (a hung process, a proxy with no
// backend) ends the Writer's and the Reader's calls with a
// *sdk.BootstrapError once the bootstrap timeout passed since the first
// dial (it ran from the first failure, which came after the engine's
// request timeout, 10 s and more), naming the address as not answering.
func TestSilentBootstrapGivesUpAfterTheTimeout(t *testing.T) {
	t.Parallel()
	addr := hostileAddr(t, hostile.Silent)
	const boot = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), failFastPatience)
	defer cancel()
	check := func(who string, err error) {
		t.Helper()
		var be *sdk.BootstrapError
		if !errors.As(err, &be) || !be.TimedOut || ctx.Err() != nil {
			t.Fatalf("%s: %v; want a *sdk.BootstrapError after the %v timeout", who, err, boot)
		}
		if want := addr + ": no answer"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not say %q", who, err, want)
		}
	}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addr), Topic: "t", RequiredAcks: kafka.RequireAll},
		testOptions(t, sdk.WithBootstrapTimeout(boot))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	check("Writer", w.WriteMessages(ctx, kafka.Message{Value: []byte("v")}))
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "t"}, testOptions(t, sdk.WithBootstrapTimeout(boot))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.FetchMessage(ctx)
	check("Reader", err)
	// The Reader's other calls that ask the cluster, each on a Reader
	// of its own: bounded by the bootstrap as FetchMessage is.
	for _, c := range []struct {
		who   string
		group string
		call  func(*sdk.Reader) error
	}{
		{"ReadLag", "", func(r *sdk.Reader) error { _, err := r.ReadLag(ctx); return err }},
		{"SetOffsetAt", "", func(r *sdk.Reader) error { return r.SetOffsetAt(ctx, time.Now()) }},
		{"CommitMessages", "g", func(r *sdk.Reader) error {
			return r.CommitMessages(ctx, kafka.Message{Topic: "t", Partition: 0, Offset: 1})
		}},
	} {
		r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "t", GroupID: c.group}, testOptions(t, sdk.WithBootstrapTimeout(boot))...)
		if err != nil {
			t.Fatal(err)
		}
		// An attempt's own bound ends after the bootstrap gave up (as
		// it does when the first dial comes a little after the attempt
		// began): the give-up ends the call, not the attempt's bound.
		sdk.SetUnreachedAttempt(r, time.Hour)
		check("Reader."+c.who, c.call(r))
		r.Close()
	}
}

// TestRefusedBootstrapGivesUpAfterTheTimeout: every bootstrap address
// refusing, a call ends with a *sdk.BootstrapError naming each address and
// matching ECONNREFUSED once the bootstrap timeout passed; a later call
// gets the whole timeout again and succeeds once the broker is up. Once a
// broker answered, refusals are ridden through (see the churn tests).
func TestRefusedBootstrapGivesUpAfterTheTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused from here on, until the broker takes the port
	const boot = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), failFastPatience)
	defer cancel()
	write := func(w *sdk.Writer) error { return w.WriteMessages(ctx, kafka.Message{Value: []byte("v")}) }
	newWriter := func(addrs ...string) *sdk.Writer {
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addrs...), Topic: "t", RequiredAcks: kafka.RequireAll},
			testOptions(t, sdk.WithBootstrapTimeout(boot))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}
	err = write(newWriter(addr, "127.0.0.1:1"))
	var be *sdk.BootstrapError
	if !errors.As(err, &be) || !be.TimedOut || ctx.Err() != nil {
		t.Fatalf("WriteMessages: %v; want a *sdk.BootstrapError after the %v timeout", err, boot)
	}
	for _, want := range []string{addr, "127.0.0.1:1", "connection refused", boot.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not match ECONNREFUSED", err)
	}

	w := newWriter(addr)
	if err := write(w); !errors.As(err, &be) {
		t.Fatalf("WriteMessages before the broker is up: %v, want a *sdk.BootstrapError", err)
	}
	// The broker comes up on the address: the next call reaches it.
	embedded.StartT(t, embedded.Topic("t", 1), embedded.KfakeOptions(kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, addr)
	})))
	if err := write(w); err != nil {
		t.Fatalf("WriteMessages once the broker is up: %v", err)
	}
}

// TestReaderWarnsWhileUnreachable: a Reader that reached its cluster and
// then meets refusals keeps waiting (its call ends with its ctx), and
// logs at Warn once the cluster has been unreachable for longer than
// MaxWait.
func TestReaderWarnsWhileUnreachable(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "unreachable", 1)
	rig.write(t, kafka.Message{Value: []byte("v")})
	logs := logwatch.New("no broker has answered")
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{rig.proxy.Addr()}, Topic: rig.topic, MaxWait: 100 * time.Millisecond},
		testOptions(t, sdk.WithLogger(logs.Logger()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.FetchMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := rig.proxy.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	rig.proxy.CloseAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fetched := make(chan error, 1)
	go func() { _, err := r.FetchMessage(ctx); fetched <- err }()
	select {
	case <-logs.Warned():
	case err := <-fetched:
		t.Fatalf("FetchMessage returned %v while the cluster was unreachable, before any Warn", err)
	case <-time.After(time.Minute):
		t.Fatal("no Warn within a minute of the cluster refusing")
	}
	cancel()
	if err := <-fetched; !errors.Is(err, context.Canceled) {
		t.Fatalf("FetchMessage: %v, want the ctx's error", err)
	}
}

// TestCloseIsBoundedWhenTheClusterStopsAnswering: a group Reader with
// marked offsets to commit and an async Writer with a message to deliver,
// both before a broker that reads every request and answers none: Close
// returns within its documented bound, says what it gave up, and the
// Writer's message reaches Completion with an error.
func TestCloseIsBoundedWhenTheClusterStopsAnswering(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "silent", 1)
	rig.write(t, kafka.Message{Value: []byte("v")})
	cfg := groupTestConfig(rig, "silent")
	cfg.CommitInterval = time.Hour // marked, committed only by Close
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadMessage(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	completed := make(chan error, 1)
	aw, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
		Async: true, BatchTimeout: time.Millisecond, WriteTimeout: 2 * time.Second,
		Completion: func(_ []kafka.Message, err error) { completed <- err }}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	// Known to the Writer before the silence: its first call asks for
	// the topic.
	if err := aw.WriteMessages(testCtx(t), kafka.Message{Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	rig.proxy.OnRequest(func(kproxy.Request) kproxy.Action {
		<-release
		return kproxy.CloseBefore
	})
	rig.proxy.CloseAll()
	if err := aw.WriteMessages(testCtx(t), kafka.Message{Value: []byte("never acknowledged")}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cerr := r.Close()
	took := time.Since(start)
	t.Logf("Reader.Close: %v after %v", cerr, took.Round(time.Millisecond))
	if took > sdk.ReaderCloseTimeout+2*time.Second || cerr == nil || !strings.Contains(cerr.Error(), "marked offsets") || !strings.Contains(cerr.Error(), rig.proxy.Addr()) {
		t.Errorf("Reader.Close: %v after %v; want, within %v, an error naming the cluster %s and saying the marked offsets may not be committed", cerr, took, sdk.ReaderCloseTimeout, rig.proxy.Addr())
	}
	start = time.Now()
	if err := aw.Close(); err != nil {
		t.Errorf("Writer.Close: %v", err)
	}
	took = time.Since(start)
	t.Logf("Writer.Close after %v", took.Round(time.Millisecond))
	if took > 2*time.Second+time.Second {
		t.Errorf("Writer.Close took %v, beyond its WriteTimeout (2s)", took)
	}
	select {
	case err := <-completed:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "closed before the message was acknowledged") {
			t.Errorf("Completion got %v, want Close's give-up matching context.DeadlineExceeded", err)
		}
	default:
		t.Error("Completion did not get the message Close gave up")
	}
}

// TestFetchWithEndedCtxHandsOutNothing: FetchMessage and ReadMessage with
// a ctx that has already ended return its error, also when messages are
// buffered, and the next call gets the message: nothing is skipped.
func TestFetchWithEndedCtxHandsOutNothing(t *testing.T) {
	t.Parallel()
	c := embedded.StartT(t, embedded.Topic("ended", 1))
	w := &kafka.Writer{Transport: ownTransport(t), Addr: kafka.TCP(c.Addrs()...), Topic: "ended", RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: []byte("0")}, kafka.Message{Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "ended", MaxWait: 100 * time.Millisecond}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.FetchMessage(testCtx(t)) // the second is buffered now
	if err != nil || string(m.Value) != "0" {
		t.Fatalf("FetchMessage: %q, %v", m.Value, err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.FetchMessage(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("FetchMessage with an ended ctx: %v, want context.Canceled", err)
	}
	if _, err := r.ReadMessage(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadMessage with an ended ctx: %v, want context.Canceled", err)
	}
	if m, err := r.FetchMessage(testCtx(t)); err != nil || string(m.Value) != "1" {
		t.Fatalf("FetchMessage after: %q, %v; want the buffered message", m.Value, err)
	}
}
