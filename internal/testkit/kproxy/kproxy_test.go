package kproxy_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// startProxy starts an embedded broker with topic (1 partition) and a proxy
// in front of it; both close when the test ends.
func startProxy(t *testing.T, topic string, opts ...kproxy.Option) (*kproxy.Proxy, string) {
	t.Helper()
	c := embedded.StartT(t, embedded.Topic(topic, 1))
	backend := c.Addrs()[0]
	p, err := kproxy.Start(backend, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, backend
}

// endOffset reads the partition's end offset straight from the broker.
func endOffset(t *testing.T, backend, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", backend, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	off, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// TestActions produces one message per case over a kafka.Conn dialled
// through the proxy, applies the action to the Produce request, and checks
// what the client saw against what the broker stored.
func TestActions(t *testing.T) {
	cases := []struct {
		action     kproxy.Action
		wantStored int64
		wantErr    func(error) bool
		errName    string
	}{
		{kproxy.Forward, 1, func(err error) bool { return err == nil }, "nil"},
		{kproxy.CloseBefore, 0, isEOF, "EOF"},
		{kproxy.CloseAfter, 1, isEOF, "EOF"},
		{kproxy.Reset, 0, func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }, "ECONNRESET"},
		{kproxy.CorruptRecords, 0, func(err error) bool { return errors.Is(err, kafka.InvalidMessage) }, "kafka.InvalidMessage (CORRUPT_MESSAGE)"},
	}
	for _, tc := range cases {
		t.Run(tc.action.String(), func(t *testing.T) {
			const topic = "actions"
			p, backend := startProxy(t, topic)
			var hits atomic.Int32
			p.OnRequest(func(r kproxy.Request) kproxy.Action {
				if r.Key == 0 && hits.Add(1) == 1 {
					return tc.action
				}
				return kproxy.Forward
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := kafka.DialLeader(ctx, "tcp", p.Addr(), topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got := conn.RemoteAddr().String(); got != p.Addr() {
				t.Fatalf("leader connection went to %s, want the proxy %s (Metadata not rewritten)", got, p.Addr())
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.WriteMessages(kafka.Message{Value: []byte("v")})
			if !tc.wantErr(err) {
				t.Fatalf("client error = %v (%T), want %s", err, err, tc.errName)
			}
			if got := endOffset(t, backend, topic); got != tc.wantStored {
				t.Fatalf("broker stored %d messages, want %d", got, tc.wantStored)
			}
			if hits.Load() != 1 {
				t.Fatalf("hook saw %d produce requests, want 1", hits.Load())
			}
		})
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func TestSetRefusing(t *testing.T) {
	p, _ := startProxy(t, "refuse")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	_, err := kafka.DialContext(ctx, "tcp", p.Addr())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: err = %v, want ECONNREFUSED", err)
	}
	if err := p.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	conn, err := kafka.DialContext(ctx, "tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial after listening again: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Brokers(); err != nil {
		t.Fatalf("metadata after listening again: %v", err)
	}
}

func TestOnConnectRefuse(t *testing.T) {
	p, _ := startProxy(t, "onconnect")
	p.OnConnect(func(uint64) kproxy.ConnAction { return kproxy.Refuse })
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on refused connection: %v, want EOF", err)
	}
}

// fakeBackend accepts connections and records everything it reads.
type fakeBackend struct {
	ln   net.Listener
	mu   sync.Mutex
	got  [][]byte
	done chan struct{}
}

func startFakeBackend(t *testing.T, echo bool) *fakeBackend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackend{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(fb.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var r io.Reader = c
				if echo {
					r = io.TeeReader(c, c)
				}
				b, _ := io.ReadAll(r)
				fb.mu.Lock()
				fb.got = append(fb.got, b)
				fb.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-fb.done })
	return fb
}

func (fb *fakeBackend) received() [][]byte {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([][]byte(nil), fb.got...)
}

func TestRawModes(t *testing.T) {
	hello := []byte("\x16\x03\x01\x00\xa5ClientHello-bytes-that-are-not-kafka")
	cases := []struct {
		name     string
		action   kproxy.ConnAction
		wantSent int // bytes the backend must receive
		wantEcho int // bytes the client may read back at most before EOF
	}{
		{"Passthrough", kproxy.Passthrough, len(hello), len(hello)},
		{"CloseAfterBytes(5)", kproxy.CloseAfterBytes(5), 5, 5},
		{"CloseAfterBytes(0)", kproxy.CloseAfterBytes(0), 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fb := startFakeBackend(t, true)
			p, err := kproxy.Start(fb.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			p.OnConnect(func(uint64) kproxy.ConnAction { return tc.action })
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write(hello); err != nil && tc.wantSent == len(hello) {
				t.Fatal(err)
			}
			if tc.wantSent == len(hello) {
				_ = conn.(*net.TCPConn).CloseWrite()
			}
			echoed, _ := io.ReadAll(conn)
			conn.Close()
			// Passthrough relays the whole echo; a cut connection may
			// close before the echo of its first bytes comes back.
			if len(echoed) > tc.wantEcho || (tc.wantSent == len(hello) && len(echoed) != tc.wantEcho) {
				t.Fatalf("client read back %d bytes, want %d", len(echoed), tc.wantEcho)
			}
			_ = p.Close()
			deadline := time.Now().Add(5 * time.Second)
			for len(fb.received()) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			got := fb.received()
			if len(got) != 1 || string(got[0]) != string(hello[:tc.wantSent]) {
				t.Fatalf("backend received %q, want %q", got, hello[:tc.wantSent])
			}
		})
	}
}

// rawRequest builds a size-prefixed request frame with kmsg.
func rawRequest(req kmsg.Request, corr int32, clientID string) []byte {
	var f kmsg.RequestFormatter
	if clientID != "" {
		f = *kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	}
	return f.AppendRequest(nil, req, corr)
}

// TestPipelining writes many requests back to back on one connection,
// Produce acks=0 ones among them, before reading any response, and checks
// that every response reaches the client in order and that the response
// hook saw the request each response answers.
func TestPipelining(t *testing.T) {
	const topic = "pipeline"
	p, backend := startProxy(t, topic)
	var mismatches, rewrites atomic.Int32
	p.OnResponse(func(r kproxy.Request, resp []byte) []byte {
		rewrites.Add(1)
		if int32(binary.BigEndian.Uint32(resp)) != r.CorrelationID {
			mismatches.Add(1)
		}
		return resp
	})
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))

	const n = 300
	var want []int32
	var buf []byte
	for i := int32(0); i < n; i++ {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			m := kmsg.NewPtrMetadataRequest()
			m.SetVersion(int16(i % 13)) // flexible and not
			req = m
		case 1:
			a := kmsg.NewPtrApiVersionsRequest()
			a.SetVersion(int16(i % 4))
			a.ClientSoftwareName, a.ClientSoftwareVersion = "t", "1"
			req = a
		case 2:
			req = produceRequest(topic, int16(3+i%7), 0, i)
		}
		if i%3 != 2 {
			want = append(want, i)
		}
		buf = append(buf, rawRequest(req, i, fmt.Sprintf("client-%d", i%5))...)
	}
	go func() { _, _ = conn.Write(buf) }()
	br := bufio.NewReader(conn)
	for _, corr := range want {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			t.Fatalf("waiting for response %d: %v", corr, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr {
			t.Fatalf("response correlation id %d, want %d", got, corr)
		}
	}
	if mismatches.Load() != 0 || int(rewrites.Load()) != len(want) {
		t.Fatalf("hook saw %d responses with %d mismatched requests, want %d and 0", rewrites.Load(), mismatches.Load(), len(want))
	}
	// The acks=0 produces reached the broker.
	deadline := time.Now().Add(5 * time.Second)
	for endOffset(t, backend, topic) != n/3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := endOffset(t, backend, topic); got != n/3 {
		t.Fatalf("broker stored %d acks=0 messages, want %d", got, n/3)
	}
	infos := p.Conns()
	if len(infos) != 1 || infos[0].Requests != n || infos[0].ClientID != fmt.Sprintf("client-%d", (n-1)%5) {
		t.Fatalf("Conns() = %+v, want 1 connection with %d requests", infos, n)
	}
}

// produceRequest builds a Produce request with one single-record batch.
func produceRequest(topic string, version, acks int16, seq int32) *kmsg.ProduceRequest {
	rec := kmsg.NewRecord()
	rec.Value = []byte(fmt.Sprintf("m%d", seq))
	recBytes := rec.AppendTo(nil)
	batch := kmsg.NewRecordBatch()
	batch.Magic = 2
	batch.NumRecords = 1
	batch.ProducerID = -1
	batch.ProducerEpoch = -1
	batch.FirstSequence = -1
	batch.Records = recBytes
	raw := batch.AppendTo(nil)
	// Fix length and CRC the way Kafka computes them.
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32c(raw[21:]))
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 5000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 0
	pp.Records = raw
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	return req
}

// TestWriterReaderUnderLoad runs concurrent kafka-go writers and a reader
// through the proxy and checks that every message arrives exactly once.
func TestWriterReaderUnderLoad(t *testing.T) {
	const topic = "load"
	p, _ := startProxy(t, topic)
	const writers, perWriter = 8, 250
	w := &kafka.Writer{Addr: kafka.TCP(p.Addr()), Topic: topic, BatchTimeout: time.Millisecond, BatchSize: 20,
		Transport: &kafka.Transport{ClientID: "load-writer"}}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(fmt.Sprintf("%d-%d", g, i))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{p.Addr()}, Topic: topic, Partition: 0, MaxWait: 20 * time.Millisecond})
	defer r.Close()
	seen := make(map[string]int)
	for len(seen) < writers*perWriter {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("after %d distinct messages: %v", len(seen), err)
		}
		seen[string(m.Value)]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("message %q read %d times", v, n)
		}
	}
	var clientIDs []string
	for _, c := range p.Conns() {
		clientIDs = append(clientIDs, c.ClientID)
	}
	if !contains(clientIDs, "load-writer") {
		t.Fatalf("live connections' client IDs %q lack the writer's", clientIDs)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestCloseAllAndResetAll kills live kafka.Conn connections and checks the
// error each client sees on its next request.
func TestCloseAllAndResetAll(t *testing.T) {
	cases := []struct {
		name string
		kill func(*kproxy.Proxy)
		want func(error) bool
	}{
		{"CloseAll", (*kproxy.Proxy).CloseAll, isEOF},
		{"ResetAll", (*kproxy.Proxy).ResetAll, func(err error) bool {
			// The RST arrives before the request is written (EPIPE or
			// ECONNRESET on write) or while waiting for the response.
			return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := startProxy(t, "kill")
			conn, err := kafka.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Brokers(); err != nil {
				t.Fatal(err)
			}
			if n := len(p.Conns()); n != 1 {
				t.Fatalf("%d live connections, want 1", n)
			}
			tc.kill(p)
			time.Sleep(50 * time.Millisecond) // let the FIN/RST arrive
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Brokers()
			if !tc.want(err) {
				t.Fatalf("request after %s: err = %v", tc.name, err)
			}
		})
	}
}

// TestNoGoroutineLeak checks that Close leaves no relay goroutine behind,
// with connections in every mode still open.
func TestNoGoroutineLeak(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("leak", 1))
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	p.OnConnect(func(uint64) kproxy.ConnAction {
		switch n.Add(1) {
		case 1:
			return kproxy.Passthrough
		case 2:
			return kproxy.CloseAfterBytes(1 << 20)
		}
		return kproxy.Accept
	})
	var conns []net.Conn
	for i := 0; i < 4; i++ {
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	if _, err := conns[3].Write(rawRequest(kmsg.NewPtrMetadataRequest(), 1, "x")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(p.Conns()) < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.SetRefusing(true); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRefusing(false); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	for _, c := range conns {
		c.Close()
	}
	if len(p.Conns()) != 0 {
		t.Fatalf("connections left after Close: %+v", p.Conns())
	}
}

func TestStartBadBackend(t *testing.T) {
	_, err := kproxy.Start("no-port")
	if err == nil || !strings.Contains(err.Error(), `"no-port"`) {
		t.Fatalf("Start(%q) error = %v, want one naming the input", "no-port", err)
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// TestOnResponseCut cuts a Metadata response after a chosen number of
// bytes: the client reads exactly those bytes, then EOF. A hook answering
// -1 leaves the response whole and the connection open.
func TestOnResponseCut(t *testing.T) {
	p, _ := startProxy(t, "cut")
	metadata := func(corr int32) []byte {
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(4)
		return rawRequest(m, corr, "cut-test")
	}
	for _, keep := range []int{0, 3, 7, -1} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			var sizes []int
			var mu sync.Mutex
			p.OnResponseCut(func(r kproxy.Request, frameSize int) int {
				mu.Lock()
				defer mu.Unlock()
				if r.Key != 3 {
					t.Errorf("cut hook saw key %d, want Metadata (3)", r.Key)
				}
				sizes = append(sizes, frameSize)
				return keep
			})
			defer p.OnResponseCut(nil)
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := conn.Write(metadata(1)); err != nil {
				t.Fatal(err)
			}
			if keep >= 0 {
				got, err := io.ReadAll(conn)
				if err != nil {
					t.Fatalf("reading the cut response: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(sizes) != 1 || len(got) != keep || keep >= sizes[0] {
					t.Fatalf("client read %d bytes of frames %v, want %d then EOF", len(got), sizes, keep)
				}
				return
			}
			// Uncut: a whole frame, and the connection still serves.
			br := bufio.NewReader(conn)
			for corr := int32(1); corr <= 2; corr++ {
				var size [4]byte
				if _, err := io.ReadFull(br, size[:]); err != nil {
					t.Fatalf("response %d: %v", corr, err)
				}
				body := make([]byte, binary.BigEndian.Uint32(size[:]))
				if _, err := io.ReadFull(br, body); err != nil {
					t.Fatalf("response %d: %v", corr, err)
				}
				if got := int32(binary.BigEndian.Uint32(body)); got != corr {
					t.Fatalf("response correlation id %d, want %d", got, corr)
				}
				if corr == 1 {
					if _, err := conn.Write(metadata(2)); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
