package retry_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/retry"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// listen starts a loopback listener whose accepted connections are handed
// to handle, and returns its address.
func listen(t *testing.T, handle func(*net.TCPConn)) string {
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
			handle(c.(*net.TCPConn))
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// Real error values, each produced by a real socket fault on loopback.

func errEOF(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) { c.Close() })
	_, err := dial(t, addr).Read(make([]byte, 1))
	return err
}

func errUnexpectedEOF(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) { c.Write([]byte{0, 0, 0}); c.Close() })
	_, err := io.ReadFull(dial(t, addr), make([]byte, 8)) // a 4-byte size and more, cut short
	return err
}

func errReset(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) {
		c.Read(make([]byte, 1)) // the client's request, then a RST instead of an answer
		c.SetLinger(0)
		c.Close()
	})
	c := dial(t, addr)
	if _, err := c.Write([]byte("r")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	return err
}

func errBrokenPipe(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) { c.Close() })
	c := dial(t, addr)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = c.Write([]byte("request")) // the first write draws a RST, a later one EPIPE
		time.Sleep(5 * time.Millisecond)
	}
	return err
}

func errRefused(t *testing.T) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.DialTimeout("tcp", addr, 2*time.Second)
	return err
}

func errTLSHandshakeClosed(t *testing.T) error {
	// The server reads the whole ClientHello record before it closes: a
	// close with unread bytes would send an RST (ECONNRESET), and a close
	// before the hello arrives makes the hello draw one.
	addr := listen(t, func(c *net.TCPConn) {
		var hdr [5]byte // TLS record header: type, version, length
		if _, err := io.ReadFull(c, hdr[:]); err == nil {
			_, _ = io.CopyN(io.Discard, c, int64(hdr[3])<<8|int64(hdr[4]))
		}
		c.Close()
	})
	return tls.Client(dial(t, addr), &tls.Config{ServerName: "broker"}).Handshake()
}

func errClosedConn(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) { time.Sleep(time.Second); c.Close() })
	c := dial(t, addr)
	c.Close()
	_, err := c.Read(make([]byte, 1))
	return err
}

func errTimeout(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) { time.Sleep(time.Second); c.Close() })
	c := dial(t, addr)
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return err
}

// errKafkaGoClosedOnAccept is what kafka-go itself returns when the broker
// closes the connection before answering.
func errKafkaGoClosedOnAccept(t *testing.T) error {
	addr := listen(t, func(c *net.TCPConn) { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ApiVersions()
	return err
}

func TestIsTransientRealSockets(t *testing.T) {
	tests := []struct {
		name      string
		make      func(*testing.T) error
		wantIs    []error // the error must match one of these
		transient bool
	}{
		{"peer closed before reply", errEOF, []error{io.EOF}, true},
		{"peer closed mid-response", errUnexpectedEOF, []error{io.ErrUnexpectedEOF}, true},
		{"peer reset (SO_LINGER 0)", errReset, []error{syscall.ECONNRESET}, true},
		{"write after peer close", errBrokenPipe, []error{syscall.EPIPE, syscall.ECONNRESET}, true},
		{"connection refused", errRefused, []error{syscall.ECONNREFUSED}, true},
		{"TLS handshake, server closes", errTLSHandshakeClosed, []error{io.EOF}, true},
		{"read on a closed net.Conn", errClosedConn, []error{net.ErrClosed}, true},
		{"kafka-go conn, broker closes on accept", errKafkaGoClosedOnAccept, []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET}, true},
		{"read deadline", errTimeout, []error{os.ErrDeadlineExceeded}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.make(t)
			if err == nil {
				t.Fatal("the fault produced no error")
			}
			matched := false
			for _, w := range tt.wantIs {
				matched = matched || errors.Is(err, w)
			}
			if !matched {
				t.Fatalf("fault produced %#v (%v), want one of %v", err, err, tt.wantIs)
			}
			wrapped := fmt.Errorf("producing to events-0: %w", err)
			inWriteErrors := kafka.WriteErrors{nil, err, fmt.Errorf("batch: %w", err)}
			for _, e := range []error{err, wrapped, inWriteErrors, fmt.Errorf("writer: %w", inWriteErrors)} {
				if got := retry.IsTransient(e); got != tt.transient {
					t.Errorf("IsTransient(%v) = %v, want %v", e, got, tt.transient)
				}
			}
		})
	}
}

// TestIsTransientTopicMissingFromMetadata takes the error kafka-go returns
// when its cached metadata lacks the topic of a produce, from a real
// exchange with a broker.
func TestIsTransientTopicMissingFromMetadata(t *testing.T) {
	c := embedded.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(c.Addrs()...)}
	_, err := cl.Produce(ctx, &kafka.ProduceRequest{Topic: "absent", Partition: 0, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte("v"))})})
	if !errors.Is(err, protocol.ErrNoTopic) {
		t.Fatalf("Produce to a topic the broker lacks: err = %v, want kafka-go's %q", err, protocol.ErrNoTopic)
	}
	if !retry.IsTransient(err) {
		t.Errorf("IsTransient(%v) = false, want true", err)
	}
}

func TestIsTransientValues(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("boom"), false},
		{"ECONNABORTED", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNABORTED)}, true},
		{"ETIMEDOUT is not on the list", os.NewSyscallError("connect", syscall.ETIMEDOUT), false},
		{"context.Canceled", context.Canceled, false},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false},
		{"canceled wins over EOF", errors.Join(io.EOF, context.Canceled), false},
		{"deadline wins over reset", fmt.Errorf("fetch: %w: %w", reset, context.DeadlineExceeded), false},
		{"kafka LeaderNotAvailable", kafka.LeaderNotAvailable, true},
		{"kafka NotLeaderForPartition", kafka.NotLeaderForPartition, true},
		{"kafka RequestTimedOut", kafka.RequestTimedOut, true},
		{"kafka NotCoordinatorForGroup", kafka.NotCoordinatorForGroup, true},
		{"kafka ThrottlingQuotaExceeded", kafka.ThrottlingQuotaExceeded, true},
		{"kafka MessageSizeTooLarge", kafka.MessageSizeTooLarge, false},
		{"kafka TopicAuthorizationFailed", kafka.TopicAuthorizationFailed, false},
		{"kafka InvalidTopic", kafka.InvalidTopic, false},
		{"kafka SASLAuthenticationFailed", fmt.Errorf("could not authenticate with SASL: %w", kafka.SASLAuthenticationFailed), false},
		{"kafka ClusterAuthorizationFailed", kafka.ClusterAuthorizationFailed, false},
		{"kafka GroupAuthorizationFailed", kafka.GroupAuthorizationFailed, false},
		{"certificate from an unknown CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"expired certificate", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}}, false},
		{"certificate for another host", &tls.CertificateVerificationError{Err: x509.HostnameError{Host: "b1"}}, false},
		{"kafka-go no partition in cached metadata", fmt.Errorf("produce: %w", protocol.NewErrNoPartition("t", 3)), true},
		{"kafka-go no leader in cached metadata", protocol.ErrNoLeader, true},
		{"kafka-go record set empty", protocol.ErrNoRecord, false},
		{"wrapped kafka error", fmt.Errorf("write: %w", kafka.NotEnoughReplicas), true},
		{"WriteErrors all transient", kafka.WriteErrors{io.EOF, nil, kafka.LeaderNotAvailable}, true},
		{"WriteErrors one permanent", kafka.WriteErrors{io.EOF, kafka.MessageSizeTooLarge}, false},
		{"WriteErrors all nil", kafka.WriteErrors{nil, nil}, false},
		{"WriteErrors empty", kafka.WriteErrors{}, false},
		{"WriteErrors with a canceled entry", kafka.WriteErrors{io.EOF, context.Canceled}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retry.IsTransient(tt.err); got != tt.want {
				t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestBackoffCeilingAndDelay(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		b       retry.Backoff
		attempt int
		ceiling time.Duration
	}{
		{"zero value, first", retry.Backoff{}, 0, 100 * ms},
		{"zero value, capped", retry.Backoff{}, 5, time.Second},
		{"doubling 0", retry.Backoff{Min: 50 * ms, Max: time.Second}, 0, 50 * ms},
		{"doubling 1", retry.Backoff{Min: 50 * ms, Max: time.Second}, 1, 100 * ms},
		{"doubling 4", retry.Backoff{Min: 50 * ms, Max: time.Second}, 4, 800 * ms},
		{"cap", retry.Backoff{Min: 50 * ms, Max: time.Second}, 5, time.Second},
		{"negative attempt", retry.Backoff{Min: 50 * ms, Max: time.Second}, -3, 50 * ms},
		{"huge attempt", retry.Backoff{Min: 50 * ms, Max: time.Second}, math.MaxInt, time.Second},
		{"overflow near MaxInt64", retry.Backoff{Min: 1 << 62, Max: math.MaxInt64}, 1, math.MaxInt64},
		{"max below min", retry.Backoff{Min: 2 * time.Second, Max: time.Second}, 3, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Ceiling(tt.attempt); got != tt.ceiling {
				t.Fatalf("Ceiling(%d) = %v, want %v", tt.attempt, got, tt.ceiling)
			}
			for _, r := range []float64{0, 0.5, math.Nextafter(1, 0)} {
				b := tt.b
				b.Rand = func() float64 { return r }
				d := b.Delay(tt.attempt)
				if d < 0 || d >= tt.ceiling {
					t.Errorf("Delay with rand %v = %v, outside [0, %v)", r, d, tt.ceiling)
				}
				if want := time.Duration(r * float64(tt.ceiling)); d != want {
					t.Errorf("Delay with rand %v = %v, want %v", r, d, want)
				}
			}
		})
	}
}

func TestBackoffBrokenRand(t *testing.T) {
	for _, r := range []float64{1, 2, -0.5, math.NaN(), math.Inf(1)} {
		b := retry.Backoff{Min: time.Second, Rand: func() float64 { return r }}
		if d := b.Delay(0); d < 0 || d >= time.Second {
			t.Errorf("rand %v: Delay = %v, outside [0, 1s)", r, d)
		}
	}
}

func TestBackoffDefaultRandSpreads(t *testing.T) {
	b := retry.Backoff{Min: time.Second}
	seen := map[time.Duration]bool{}
	for i := 0; i < 100; i++ {
		seen[b.Delay(0)] = true
	}
	if len(seen) < 90 {
		t.Fatalf("100 default delays gave only %d distinct values", len(seen))
	}
}

func TestPolicyDo(t *testing.T) {
	permanent := errors.New("permanent")
	tests := []struct {
		name      string
		attempts  int
		errs      []error // fn's results, in order; nil after the end
		wantCalls int
		wantIs    error
		wantWaits int
	}{
		{"first try succeeds", 3, nil, 1, nil, 0},
		{"succeeds after two transient", 5, []error{io.EOF, syscall.ECONNRESET}, 3, nil, 2},
		{"permanent returns at once", 5, []error{permanent}, 1, permanent, 0},
		{"permanent after transient", 5, []error{io.EOF, permanent}, 2, permanent, 1},
		{"attempts run out", 3, []error{io.EOF, io.EOF, io.ErrUnexpectedEOF, io.EOF}, 3, io.ErrUnexpectedEOF, 2},
		{"single attempt", 1, []error{io.EOF}, 1, io.EOF, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var waits []time.Duration
			p := retry.Policy{
				MaxAttempts: tt.attempts,
				Backoff:     retry.Backoff{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond, Rand: func() float64 { return 0.5 }},
				Wait: func(_ context.Context, d time.Duration) error {
					waits = append(waits, d)
					return nil
				},
			}
			calls := 0
			err := p.Do(context.Background(), func(context.Context) error {
				calls++
				if calls <= len(tt.errs) {
					return tt.errs[calls-1]
				}
				return nil
			})
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if tt.wantIs == nil && err != nil || tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want %v", err, tt.wantIs)
			}
			if len(waits) != tt.wantWaits {
				t.Fatalf("waits = %v, want %d of them", waits, tt.wantWaits)
			}
			for i, d := range waits {
				if want := p.Backoff.Ceiling(i) / 2; d != want {
					t.Errorf("wait %d = %v, want %v", i, d, want)
				}
			}
		})
	}
}

func TestPolicyDoStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := retry.Policy{MaxAttempts: 100, Backoff: retry.Backoff{Min: time.Hour, Max: time.Hour}}
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- p.Do(ctx, func(context.Context) error { calls++; return io.EOF })
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v, want it to wrap context.Canceled and io.EOF", err)
		}
		if calls != 1 {
			t.Fatalf("calls = %d, want 1", calls)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Do did not return after ctx was canceled")
	}
}

func TestPolicyDefaults(t *testing.T) {
	var p retry.Policy
	if p.Attempts() != retry.DefaultMaxAttempts {
		t.Errorf("Attempts() = %d, want %d", p.Attempts(), retry.DefaultMaxAttempts)
	}
	if !p.Retryable(io.EOF) || p.Retryable(errors.New("x")) {
		t.Error("zero Policy must retry exactly what IsTransient accepts")
	}
	p.ShouldRetry = func(error) bool { return true }
	if !p.Retryable(errors.New("x")) {
		t.Error("ShouldRetry not used")
	}
}

func BenchmarkIsTransient(b *testing.B) {
	errs := []error{
		fmt.Errorf("write: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}),
		kafka.WriteErrors{nil, io.EOF, nil},
		errors.New("permanent"),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		retry.IsTransient(errs[i%len(errs)])
	}
}

func BenchmarkBackoffDelay(b *testing.B) {
	bo := retry.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bo.Delay(i % 8)
	}
}
