package sdk_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/testpki"
	"github.com/azkafka/azkafka/sdk"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
)

// hermetic are the options every test passes: an explicit AZ and an empty
// environment, so that nothing here can reach a metadata service.
func hermetic(az string) []sdk.Option {
	return []sdk.Option{sdk.WithAZ(az), sdk.WithGetenv(func(string) string { return "" })}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recordClientIDs makes p remember the client ID of every request it relays.
func recordClientIDs(p *kproxy.Proxy) func() map[string]int {
	var mu sync.Mutex
	seen := map[string]int{}
	p.OnRequest(func(r kproxy.Request) kproxy.Action {
		mu.Lock()
		seen[r.ClientID]++
		mu.Unlock()
		return kproxy.Forward
	})
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

func startProxy(t *testing.T, c *embedded.Cluster) *kproxy.Proxy {
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// onlyClientID fails unless every request carried want.
func onlyClientID(t *testing.T, seen map[string]int, want string) {
	t.Helper()
	if len(seen) != 1 || seen[want] == 0 {
		t.Fatalf("the broker saw client IDs %v, want only %q", seen, want)
	}
	p, err := sdk.ParseClientID(want)
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != "billing" || p.AZ != "us-east-1a" || !p.InterzoneLB || p.SessionID == "" {
		t.Fatalf("client ID parts %+v", p)
	}
}

func TestTransportStampsClientID(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("events", 1))
	p := startProxy(t, c)
	seen := recordClientIDs(p)
	tr, err := sdk.NewTransport(&kafka.Transport{ClientID: "billing"}, hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(p.Addr()), Topic: "events", Transport: tr, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(testCtx(t), kafka.Message{Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	onlyClientID(t, seen(), tr.ClientID)
}

// TestDialerStampsClientIDSeenByBroker checks the client ID from the
// broker's side: a consumer group member's client ID, as DescribeGroups
// reports it, is the one the Dialer stamped.
func TestDialerStampsClientIDSeenByBroker(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("events", 1))
	p := startProxy(t, c)
	seen := recordClientIDs(p)
	d, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 5 * time.Second}, append(hermetic("us-east-1a"), sdk.WithClientID("billing"))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	conn, err := d.DialLeader(ctx, "tcp", p.Addr(), "events", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteMessages(kafka.Message{Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{p.Addr()}, Topic: "events", GroupID: "g1", Dialer: d,
		MaxWait: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout: time.Second, RebalanceTimeout: time.Second,
	})
	defer r.Close()
	if _, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	cl := &kafka.Client{Addr: kafka.TCP(c.Addrs()...)}
	resp, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{"g1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || len(resp.Groups[0].Members) != 1 {
		t.Fatalf("groups %+v", resp.Groups)
	}
	if got := resp.Groups[0].Members[0].ClientID; got != d.ClientID {
		t.Fatalf("the broker has member client ID %q, want %q", got, d.ClientID)
	}
	onlyClientID(t, seen(), d.ClientID)
}

func TestDialerKeepsBaseSettings(t *testing.T) {
	resolver := &countingResolver{}
	var baseDials atomic.Int32
	base := &kafka.Dialer{
		ClientID:        "billing",
		Timeout:         7 * time.Second,
		Deadline:        time.Unix(4_000_000_000, 0),
		Resolver:        resolver,
		TLS:             &tls.Config{ServerName: "x"},
		SASLMechanism:   plain.Mechanism{Username: "u", Password: "p"},
		TransactionalID: "tx",
		DialFunc: func(ctx context.Context, network, addr string) (net.Conn, error) {
			baseDials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	d, err := sdk.NewAZAwareDialer(base, hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	if d == base || d.Timeout != base.Timeout || d.Deadline != base.Deadline || d.Resolver != base.Resolver ||
		d.SASLMechanism != base.SASLMechanism || d.TransactionalID != base.TransactionalID {
		t.Fatalf("settings not kept: %+v", d)
	}
	if d.TLS != nil {
		t.Fatal("TLS left to kafka-go: it must be done in DialFunc, below the frame guard")
	}
	if base.ClientID != "billing" || !strings.HasPrefix(d.ClientID, "billing,warpstream_session_id=") {
		t.Fatalf("base ClientID %q, new %q", base.ClientID, d.ClientID)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close() // a plaintext listener refusing the ClientHello
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = d.DialFunc(ctx, "tcp", ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "plaintext listener") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("DialFunc with the base TLS against a closing plaintext port: err = %v", err)
	}
	if baseDials.Load() != 1 {
		t.Fatalf("base DialFunc called %d times, want 1", baseDials.Load())
	}
}

type countingResolver struct{ n atomic.Int32 }

func (r *countingResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.n.Add(1)
	return []string{host}, nil
}

// TestTLSAndSASLThroughPolicy runs the Dialer and the Transport against a
// broker that requires TLS and SASL/PLAIN: kafka-go layers both on top of
// the policy's connection.
func TestTLSAndSASLThroughPolicy(t *testing.T) {
	serverTLS, clientTLS := tlsConfigPair(t)
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"), kfake.TLS(serverTLS),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	addr := k.ListenAddrs()[0]
	mech := plain.Mechanism{Username: "admin", Password: "secret"}
	ctx := testCtx(t)

	// The broker resolves by name: the resolver maps it to the address.
	resolver := &mapResolver{name: "broker.test", addr: addr}
	d, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 5 * time.Second, TLS: clientTLS, SASLMechanism: mech, Resolver: resolver},
		hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := d.DialContext(ctx, "tcp", "broker.test:"+portOf(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadPartitions("events"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if resolver.n.Load() == 0 {
		t.Fatal("the base Resolver was not used")
	}
	// A TLS connection that served requests is healthy, not an early close.
	if st, _ := sdk.DialerConnStats(d); st.ConnectionsCreated != 1 || st.EarlyCloses != 0 {
		t.Fatalf("dialer stats %+v", st)
	}

	tr, err := sdk.NewTransport(&kafka.Transport{TLS: clientTLS, SASL: mech}, hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr}
	if _, err := cl.Metadata(ctx, &kafka.MetadataRequest{}); err != nil {
		t.Fatal(err)
	}

	// And without credentials, the broker refuses: SASL really ran above.
	bad, err := sdk.NewTransport(&kafka.Transport{TLS: clientTLS, SASL: plain.Mechanism{Username: "admin", Password: "wrong"}}, hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.CloseIdleConnections()
	if _, err := (&kafka.Client{Addr: kafka.TCP(addr), Transport: bad}).Metadata(ctx, &kafka.MetadataRequest{}); err == nil {
		t.Fatal("a wrong password was accepted")
	}
}

type mapResolver struct {
	name, addr string
	n          atomic.Int32
}

func (r *mapResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	r.n.Add(1)
	if host == r.name {
		h, _, _ := net.SplitHostPort(r.addr)
		return []string{h}, nil
	}
	return []string{host}, nil
}

func portOf(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

// tlsConfigPair is a loopback broker certificate of a CA of its own and a
// client config that trusts that CA alone.
func tlsConfigPair(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	return tlsConfigPairValid(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// tlsConfigPairValid is tlsConfigPair with a certificate valid from
// notBefore to notAfter.
func tlsConfigPairValid(t *testing.T, notBefore, notAfter time.Time) (server, client *tls.Config) {
	t.Helper()
	ca := testpki.NewCA(t, "azkafka test CA")
	return testpki.ServerConfig(ca.Server(t, notBefore, notAfter)), ca.ClientConfig()
}

func TestConstructorsRejectInvalidConfiguration(t *testing.T) {
	getenv := sdk.WithGetenv(func(k string) string {
		if k == "AZKAFKA_MAX_CONN_RATE" {
			return "fast"
		}
		return ""
	})
	if _, err := sdk.NewAZAwareDialer(nil, sdk.WithAZ("a"), getenv); err == nil || !strings.Contains(err.Error(), `AZKAFKA_MAX_CONN_RATE="fast"`) {
		t.Fatalf("NewAZAwareDialer: %v", err)
	}
	if _, err := sdk.NewTransport(nil, sdk.WithAZ("a"), getenv); err == nil || !strings.Contains(err.Error(), `AZKAFKA_MAX_CONN_RATE="fast"`) {
		t.Fatalf("NewTransport: %v", err)
	}
	if _, err := sdk.NewAZAwareDialer(&kafka.Dialer{ClientID: "a,,b"}, hermetic("a")...); err == nil {
		t.Fatal("an invalid base ClientID was accepted")
	}
	// Kafka refuses every other acks value: kafka-go's Writer fails each
	// message with INVALID_REQUIRED_ACKS.
	for _, acks := range []kafka.RequiredAcks{2, -2, 100} {
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: "t", RequiredAcks: acks}, hermetic("a")...)
		if want := fmt.Sprintf("kafka.Writer.RequiredAcks is %d:", acks); err == nil || !strings.Contains(err.Error(), want) {
			if w != nil {
				w.Close()
			}
			t.Fatalf("NewWriter with RequiredAcks %d: %v, want an error holding %q", acks, err, want)
		}
	}
}

// TestTLSCloseAfterHandshakeIsEarly: a TLS server that completes the
// handshake, reads the first request and closes unanswered (a throttling
// broker behind TLS). The policy sees only encrypted bytes; the handshake's
// answers must not count as a served request, so the next dial backs off.
func TestTLSCloseAfterHandshakeIsEarly(t *testing.T) {
	serverTLS, clientTLS := tlsConfigPair(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var handshakes atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if c.(*tls.Conn).Handshake() != nil {
					return
				}
				handshakes.Add(1)
				c.Read(make([]byte, 512)) // the ApiVersions request, never answered
			}()
		}
	}()
	d, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 5 * time.Second, TLS: clientTLS},
		append(hermetic("us-east-1a"), sdk.WithConnLimiter(nil))...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		conn, err := d.DialContext(testCtx(t), "tcp", ln.Addr().String())
		if err == nil {
			_, err = conn.ApiVersions()
			conn.Close()
		}
		if err == nil {
			t.Fatalf("request %d: the server never answers, yet it succeeded", i)
		}
	}
	st, ok := sdk.DialerConnStats(d)
	if !ok {
		t.Fatal("no stats for the Dialer")
	}
	if handshakes.Load() != 3 || st.ConnectionsCreated != 3 || st.EarlyCloses != 3 {
		t.Fatalf("handshakes %d, stats %+v: want 3 completed handshakes counted as 3 early closes", handshakes.Load(), st)
	}
	if st.BackoffWait <= 0 {
		t.Fatalf("re-dials after early closes did not back off: %+v", st)
	}
}

// TestFrameGuardReadsUnderTLS: behind a TLS listener that answers the
// first request with a negative frame size, kafka-go's clients on the
// SDK's Transport and Dialer get the guard's refusal, not a panic: the
// TLS handshake runs in the SDK's dial function, below the guard, so the
// guard reads the decrypted frames.
func TestFrameGuardReadsUnderTLS(t *testing.T) {
	serverTLS, clientTLS := tlsConfigPair(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var size [4]byte
				if _, err := io.ReadFull(c, size[:]); err != nil {
					return
				}
				_, _ = c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := addr + ": negative response size -16"

	tr, err := sdk.NewTransport(&kafka.Transport{TLS: clientTLS}, hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	_, err = (&kafka.Client{Addr: kafka.TCP(addr), Transport: tr}).Metadata(ctx, &kafka.MetadataRequest{})
	if !errors.Is(err, sdk.ErrBadResponse) || !strings.Contains(err.Error(), want) {
		t.Errorf("Transport: err = %v, want ErrBadResponse saying %q", err, want)
	}

	d, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 5 * time.Second, TLS: clientTLS}, hermetic("us-east-1a")...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ApiVersions(); !errors.Is(err, sdk.ErrBadResponse) || !strings.Contains(err.Error(), want) {
		t.Errorf("Dialer: err = %v, want ErrBadResponse saying %q", err, want)
	}
}
