package frameguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
)

// pipeConn is a net.Conn over in-memory bytes: Read serves the chunks of
// in, one per call (a nil chunk is a timeout), then io.EOF; Write keeps what
// it is given.
type pipeConn struct {
	in        [][]byte
	out       bytes.Buffer
	closed    bool
	deadlines []time.Time // the read deadlines set, in order
	// beforeRead, when set, runs at the start of each Read.
	beforeRead func()
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func (p *pipeConn) Read(b []byte) (int, error) {
	if p.beforeRead != nil {
		p.beforeRead()
	}
	if p.closed {
		return 0, net.ErrClosed
	}
	if len(p.in) == 0 {
		return 0, io.EOF
	}
	if p.in[0] == nil {
		p.in = p.in[1:]
		return 0, timeoutErr{}
	}
	n := copy(b, p.in[0])
	if p.in[0] = p.in[0][n:]; len(p.in[0]) == 0 {
		p.in = p.in[1:]
	}
	return n, nil
}
func (p *pipeConn) Write(b []byte) (int, error) {
	if p.closed {
		return 0, net.ErrClosed
	}
	return p.out.Write(b)
}
func (p *pipeConn) Close() error                  { p.closed = true; return nil }
func (p *pipeConn) LocalAddr() net.Addr           { return &net.TCPAddr{} }
func (p *pipeConn) RemoteAddr() net.Addr          { return &net.TCPAddr{} }
func (p *pipeConn) SetDeadline(t time.Time) error { return p.SetReadDeadline(t) }
func (p *pipeConn) SetReadDeadline(t time.Time) error {
	p.deadlines = append(p.deadlines, t)
	return nil
}
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }

const testAddr = "127.0.0.1:9092"

// request encodes r as a client sends it, with correlation ID corr.
func request(r kmsg.Request, version int16, corr int32) []byte {
	r.SetVersion(version)
	b := make([]byte, 4, 128)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if r.IsFlexible() && r.Key() != int16(kmsg.ControlledShutdown) {
		b = append(b, 0)
	}
	b = r.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// response encodes r as a broker answers request corr.
func response(r kmsg.Response, version int16, corr int32) []byte {
	r.SetVersion(version)
	b := binary.BigEndian.AppendUint32(make([]byte, 4, 128), uint32(corr))
	if r.IsFlexible() && r.Key() != int16(kmsg.ApiVersions) {
		b = append(b, 0)
	}
	b = r.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func frame(body ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(bytes.Join(body, nil))))
	return append(b, bytes.Join(body, nil)...)
}

func metadataResponse() kmsg.Response {
	r := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "localhost", 9092
	r.Brokers = append(r.Brokers, b)
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("t")
	t.Partitions = append(t.Partitions, kmsg.NewMetadataResponseTopicPartition())
	r.Topics = append(r.Topics, t)
	return r
}

// readAll reads from c until an error and returns what it read.
func readAll(c net.Conn) ([]byte, error) {
	var got []byte
	buf := make([]byte, 7) // small reads: frames are served across calls
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
}

// readSized reads from c as kgo does, until an error: a 4-byte size
// prefix, then the body into a buffer of that size. It returns what the
// reads handed out.
func readSized(c net.Conn) ([]byte, error) {
	var got []byte
	for {
		var size [4]byte
		n, err := io.ReadFull(c, size[:])
		got = append(got, size[:n]...)
		if err != nil {
			return got, err
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		n, err = io.ReadFull(c, body)
		got = append(got, body[:n]...)
		if err != nil {
			return got, err
		}
	}
}

// reader is a way clients read responses, from a guard whose bodies of
// more than direct bytes are read straight into the client's buffer.
type reader struct {
	name   string
	read   func(net.Conn) ([]byte, error)
	direct int
}

// readers are kafka-go's way, through a buffer that cuts frames anywhere
// (small reads here), and kgo's, a size prefix then the whole body; each
// with the guard's default and with every body read straight (direct 0).
var readers = []reader{
	{"chunks", readAll, directMin}, {"sized", readSized, directMin},
	{"chunks/direct", readAll, 0}, {"sized/direct", readSized, 0},
}

// wrap guards pc as rd's test wants.
func (rd reader) wrap(pc net.Conn, limit int) net.Conn {
	c := Wrap(pc, testAddr, limit, nil)
	c.(*Conn).direct = rd.direct
	return c
}

// prefixOf is how much of a frame beginning with in that is not passed on
// may reach the client: its size prefix, when its body is read straight.
func (rd reader) prefixOf(in []byte) int {
	if len(in) >= 4 && int(int32(binary.BigEndian.Uint32(in))) > rd.direct {
		return 4
	}
	return 0
}

func TestValidResponsesPassUnchanged(t *testing.T) {
	for _, rd := range readers {
		for _, version := range []int16{1, 8, 9, 12} {
			resp := response(metadataResponse(), version, 7)
			pc := &pipeConn{in: [][]byte{resp[:3], resp[3:10], resp[10:]}}
			c := rd.wrap(pc, 0)
			req := request(kmsg.NewPtrMetadataRequest(), version, 7)
			if _, err := c.Write(req[:5]); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(req[5:]); err != nil {
				t.Fatal(err)
			}
			got, err := rd.read(c)
			if !bytes.Equal(got, resp) || err != io.EOF {
				t.Errorf("%s, v%d: read %d bytes, err %v; want the %d-byte response and EOF", rd.name, version, len(got), err, len(resp))
			}
			if !bytes.Equal(pc.out.Bytes(), req) {
				t.Errorf("%s, v%d: the request was not sent unchanged", rd.name, version)
			}
		}
	}
}

// TestSizedReadsOfLargeResponses reads Fetch responses larger than the
// frame buffer's first size, and a small one between them, kgo's way, and
// then a body read in two parts after its prefix: each passes unchanged.
func TestSizedReadsOfLargeResponses(t *testing.T) {
	var reqs, resps []byte
	for i, n := range []int{3 << 20, 100, directMin + 1} {
		reqs = append(reqs, request(kmsg.NewPtrFetchRequest(), 12, int32(i))...)
		resps = append(resps, withCorrelation(fetchResponse(n), int32(i))...)
	}
	pc := &pipeConn{in: [][]byte{resps}}
	c := Wrap(pc, testAddr, 0, nil)
	if _, err := c.Write(reqs); err != nil {
		t.Fatal(err)
	}
	if got, err := readSized(c); !bytes.Equal(got, resps) || err != io.EOF {
		t.Errorf("read %d of %d bytes, err %v", len(got), len(resps), err)
	}

	resp := withCorrelation(fetchResponse(directMin+5000), 9)
	pc = &pipeConn{in: [][]byte{resp}}
	c = Wrap(pc, testAddr, 0, nil)
	if _, err := c.Write(request(kmsg.NewPtrFetchRequest(), 12, 9)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(resp))
	if _, err := io.ReadFull(c, got[:4]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got[4:100]); err != nil { // shorter than the body
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got[100:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, resp) {
		t.Error("a body read in parts after its prefix changed")
	}
}

// withCorrelation is frame, a response, with correlation ID corr.
func withCorrelation(frame []byte, corr int32) []byte {
	binary.BigEndian.PutUint32(frame[4:], uint32(corr))
	return frame
}

func TestPipelinedRequestsAndAcksZero(t *testing.T) {
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks = 0
	noAck := request(prod, 7, 1)
	prod.Acks = -1
	withAck := request(prod, 9, 3)
	reqs := bytes.Join([][]byte{noAck, request(kmsg.NewPtrMetadataRequest(), 9, 2), withAck, request(kmsg.NewPtrApiVersionsRequest(), 3, 4)}, nil)
	resps := bytes.Join([][]byte{
		response(metadataResponse(), 9, 2),
		response(kmsg.NewPtrProduceResponse(), 9, 3),
		response(kmsg.NewPtrApiVersionsResponse(), 3, 4),
	}, nil)
	for _, rd := range readers {
		pc := &pipeConn{in: [][]byte{resps}}
		c := rd.wrap(pc, 0)
		if _, err := c.Write(reqs); err != nil {
			t.Fatal(err)
		}
		got, err := rd.read(c)
		if !bytes.Equal(got, resps) || err != io.EOF {
			t.Errorf("%s: read %d of %d bytes, err %v", rd.name, len(got), len(resps), err)
		}
	}
}

func TestApiVersionsAnsweredInV0(t *testing.T) {
	r := kmsg.NewPtrApiVersionsResponse()
	r.ErrorCode = 35
	resp := response(r, 0, 1)
	pc := &pipeConn{in: [][]byte{resp}}
	c := Wrap(pc, testAddr, 0, nil)
	if _, err := c.Write(request(kmsg.NewPtrApiVersionsRequest(), 4, 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(c); !bytes.Equal(got, resp) || err != io.EOF {
		t.Errorf("read %d of %d bytes, err %v", len(got), len(resp), err)
	}
}

func TestReadResumesAfterTimeout(t *testing.T) {
	// A timeout after bytes came is read past (TestSlowBodyReadOnPastTheDeadline);
	// the second, with none since, is returned.
	resp := response(metadataResponse(), 9, 1)
	pc := &pipeConn{in: [][]byte{resp[:20], nil, nil, resp[20:]}}
	c := Wrap(pc, testAddr, 0, nil)
	if _, err := c.Write(request(kmsg.NewPtrMetadataRequest(), 9, 1)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	if n, err := c.Read(buf); n != 0 || !isTimeout(err) {
		t.Fatalf("first read: %d bytes, err %v; want the timeout and nothing of the partial frame", n, err)
	}
	if got, err := readAll(c); !bytes.Equal(got, resp) || err != io.EOF {
		t.Errorf("after the timeout: read %d of %d bytes, err %v", len(got), len(resp), err)
	}

	// Read kgo's way, the timeout comes inside the body: the next body
	// read goes on from what was read.
	pc = &pipeConn{in: [][]byte{resp[:20], nil, nil, resp[20:]}}
	c = reader{direct: 0}.wrap(pc, 0)
	if _, err := c.Write(request(kmsg.NewPtrMetadataRequest(), 9, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		t.Fatal(err)
	}
	body := buf[4:len(resp)]
	if n, err := c.Read(body); n != 0 || !isTimeout(err) {
		t.Fatalf("body read: %d bytes, err %v; want the timeout and nothing of the partial body", n, err)
	}
	if n, err := io.ReadFull(c, body); err != nil || !bytes.Equal(buf[:len(resp)], resp) {
		t.Errorf("after the timeout: read %d of %d body bytes, err %v", n, len(body), err)
	}
}

// TestSlowBodyReadOnPastTheDeadline: a frame whose body is still arriving
// when the caller's read deadline passes is read on, the deadline moved
// bodyStall ahead at each timeout that followed bytes, then set back to
// the caller's; read whole or kgo's way (the body into one buffer).
func TestSlowBodyReadOnPastTheDeadline(t *testing.T) {
	resp := response(metadataResponse(), 9, 1)
	for _, rd := range []reader{{direct: 0}, {direct: directMin}} {
		pc := &pipeConn{in: [][]byte{resp[:20], nil, resp[20:40], nil, resp[40:]}}
		c := rd.wrap(pc, 0)
		if _, err := c.Write(request(kmsg.NewPtrMetadataRequest(), 9, 1)); err != nil {
			t.Fatal(err)
		}
		caller := time.Now().Add(time.Second)
		if err := c.SetReadDeadline(caller); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		var got []byte
		var err error
		if rd.direct == 0 {
			// kgo's way: the size prefix, then the body into one buffer.
			got = make([]byte, len(resp))
			if _, err = io.ReadFull(c, got[:4]); err == nil {
				var n int
				n, err = c.Read(got[4:])
				got = got[:4+n]
			}
		} else {
			got, err = readAll(c)
			if err == io.EOF {
				err = nil
			}
		}
		if err != nil || !bytes.Equal(got, resp) {
			t.Fatalf("direct %d: read %d of %d bytes, err %v; want the whole response", rd.direct, len(got), len(resp), err)
		}
		ds := pc.deadlines
		if len(ds) != 4 || !ds[0].Equal(caller) || !ds[3].Equal(caller) {
			t.Fatalf("direct %d: read deadlines set %v; want the caller's, two extensions, the caller's again", rd.direct, ds)
		}
		for _, d := range ds[1:3] {
			if d.Before(before.Add(bodyStall)) {
				t.Errorf("direct %d: an extension to %v, want bodyStall (%v) past the timeout", rd.direct, d, bodyStall)
			}
		}
	}
}

// TestAbortInsideABody: a client that ends a read by moving its read
// deadline (kgo sets it to now when it closes, or when a request's ctx
// ends) while a body is arriving gets the timeout at once: the guard
// extends only the deadline the body began under.
func TestAbortInsideABody(t *testing.T) {
	resp := response(metadataResponse(), 9, 1)
	for _, rd := range []reader{{direct: 0}, {direct: directMin}} {
		pc := &pipeConn{in: [][]byte{resp[:20], nil, resp[20:]}}
		c := rd.wrap(pc, 0)
		if _, err := c.Write(request(kmsg.NewPtrMetadataRequest(), 9, 1)); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		reads := 0
		pc.beforeRead = func() {
			if reads++; len(pc.in) > 0 && pc.in[0] == nil {
				// The client ends the read just as the timeout comes.
				_ = c.SetReadDeadline(time.Now())
			}
		}
		var err error
		if rd.direct == 0 {
			got := make([]byte, len(resp))
			if _, err = io.ReadFull(c, got[:4]); err == nil {
				_, err = c.Read(got[4:])
			}
		} else {
			_, err = readAll(c)
		}
		if !isTimeout(err) {
			t.Fatalf("direct %d: read ended with %v; want the timeout the client asked for", rd.direct, err)
		}
		for _, d := range pc.deadlines {
			if d.After(time.Now().Add(bodyStall / 2)) {
				t.Errorf("direct %d: the guard extended the deadline to %v after the client moved it", rd.direct, d)
			}
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPeerClosingInsideAFrame(t *testing.T) {
	resp := response(metadataResponse(), 9, 1)
	for _, rd := range readers {
		for _, cut := range []int{len(resp) - 1, 4} {
			pc := &pipeConn{in: [][]byte{resp[:cut]}}
			c := rd.wrap(pc, 0)
			if _, err := c.Write(request(kmsg.NewPtrMetadataRequest(), 9, 1)); err != nil {
				t.Fatal(err)
			}
			got, err := rd.read(c)
			if errors.Is(err, ErrRefused) || !(err == io.EOF || err == io.ErrUnexpectedEOF) {
				t.Errorf("%s, closed after %d bytes: err %v; a close is not a refusal", rd.name, cut, err)
			}
			if len(got) > rd.prefixOf(resp) {
				t.Errorf("%s, closed after %d bytes: %d bytes of the cut frame reached the client", rd.name, cut, len(got))
			}
		}
	}
}

// TestRefusals feeds each kind of hostile bytes to a guarded client
// connection and checks the error, that the connection is closed, that
// later calls fail alike, and that the guard allocated little.
func TestRefusals(t *testing.T) {
	bomb := binary.BigEndian.AppendUint32(nil, 1) // correlation ID
	bomb = append(bomb, 0)                        // header tags
	bomb = append(bomb, 0, 0, 0, 0)               // throttle
	bomb = append(bomb, 1)                        // no brokers
	bomb = append(bomb, 0)                        // null cluster ID
	bomb = append(bomb, 0, 0, 0, 1)               // controller
	bomb = binary.AppendUvarint(bomb, 1_000_001)  // a million topics
	bomb = append(bomb, make([]byte, 80)...)
	tagBomb := binary.BigEndian.AppendUint32(nil, 1)
	tagBomb = append(tagBomb, 1, 0)
	tagBomb = binary.AppendUvarint(tagBomb, 1<<63-1)
	http := []byte("HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n\r\n<html></html>")

	cases := []struct {
		name  string
		in    []byte
		limit int
		words []string
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}, 0, []string{"negative response size -16"}},
		{"huge size", []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}, 0, []string{"response of 2147483647 bytes exceeds the 104857600-byte limit (AZKAFKA_MAX_RESPONSE_BYTES)"}},
		{"over a set limit", frame(make([]byte, 2000)), 1000, []string{"response of 2000 bytes exceeds the 1000-byte limit"}},
		{"shorter than a correlation ID", []byte{0, 0, 0, 2, 0, 0}, 0, []string{"response of 2 bytes is shorter than a correlation ID"}},
		{"HTTP", http, 0, []string{`not a Kafka broker: its reply begins "HTTP/1.1 400 Bad Request"`}},
		{"TLS alert", []byte{0x15, 3, 3, 0, 2, 2, 0x32}, 0, []string{"a TLS record on a plaintext connection", "set TLS"}},
		{"wrong correlation ID", response(metadataResponse(), 9, 2), 0, []string{"correlation ID 2 where 1 (Metadata v9) was due"}},
		{"metadata count bomb", frame(bomb), 0, []string{"malformed Metadata v9 response (98 bytes)", "runs past its end"}},
		{"header tag bomb", frame(tagBomb), 0, []string{"malformed Metadata v9 response header"}},
		{"random body", frame([]byte{0, 0, 0, 1}, bytes.Repeat([]byte{0xa5, 0x17, 0xff}, 300)), 0, []string{"malformed Metadata v9 response", "(904 bytes)"}},
		{"large random body", frame([]byte{0, 0, 0, 1}, bytes.Repeat([]byte{0xa5, 0x17, 0xff}, directMin/3+100)), 0, []string{"malformed Metadata v9 response", fmt.Sprintf("(%d bytes)", 4+3*(directMin/3+100))}},
		{"large, wrong correlation ID", withCorrelation(fetchResponse(directMin), 2), 0, []string{"correlation ID 2 where 1 (Metadata v9) was due"}},
	}
	for _, rd := range readers {
		for _, tc := range cases {
			t.Run(rd.name+"/"+tc.name, func(t *testing.T) {
				refused(t, rd, tc.in, tc.limit, tc.words)
			})
		}
	}
}

// refused feeds in to a guarded connection read by rd and checks that it
// is refused with an error that says words, that the connection is
// closed, that later calls fail alike, and that the guard allocated
// little. Only a size prefix read alone may reach the client.
func refused(t *testing.T, rd reader, in []byte, limit int, words []string) {
	t.Helper()
	pc := &pipeConn{in: [][]byte{in}}
	c := rd.wrap(pc, limit)
	if _, err := c.Write(request(kmsg.NewPtrMetadataRequest(), 9, 1)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := rd.read(c)
	runtime.ReadMemStats(&after)
	var ge *Error
	if !errors.As(err, &ge) || !errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v (%T), want an *Error", err, err)
	}
	if !strings.HasPrefix(err.Error(), testAddr+": ") {
		t.Errorf("error %q does not begin with the address", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if len(got) > rd.prefixOf(in) {
		t.Errorf("%d bytes of a refused frame reached the client", len(got))
	}
	if !pc.closed {
		t.Error("the connection was not closed")
	}
	if _, werr := c.Write([]byte{0, 0, 0, 0}); werr != err {
		t.Errorf("a later Write: %v, want the refusal", werr)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 256<<10 {
		t.Errorf("the guard allocated %d bytes refusing a %d-byte reply", d, len(in))
	}
}

func TestUnsolicitedResponse(t *testing.T) {
	pc := &pipeConn{in: [][]byte{response(metadataResponse(), 9, 1)}}
	c := Wrap(pc, testAddr, 0, nil)
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "to no request") {
		t.Errorf("err = %v, want a refusal of a response to no request", err)
	}
}

func TestClientTLSOnTopPassesThrough(t *testing.T) {
	junk := []byte{0x16, 3, 3, 0, 5, 1, 2, 3, 4, 5}
	pc := &pipeConn{in: [][]byte{junk}}
	c := Wrap(pc, testAddr, 0, nil)
	if _, err := c.Write([]byte{0x16, 3, 1, 0, 10}); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(c); !bytes.Equal(got, junk) || err != io.EOF {
		t.Errorf("read %x, %v; want the bytes as they came", got, err)
	}
}

func TestLongClientIDAndUnparseableRequests(t *testing.T) {
	// A 30 KiB client ID: the scanner keeps reading until the header parses.
	req := request(kmsg.NewPtrMetadataRequest(), 9, 5)
	id := strings.Repeat("x", 30<<10)
	long := append([]byte(nil), req[:12]...)
	long = binary.BigEndian.AppendUint16(long, uint16(len(id)))
	long = append(long, id...)
	long = append(long, req[18:]...)
	binary.BigEndian.PutUint32(long, uint32(len(long)-4))
	resp := response(metadataResponse(), 9, 5)
	pc := &pipeConn{in: [][]byte{resp}}
	c := Wrap(pc, testAddr, 0, nil)
	for i := 0; i < len(long); i += 1000 {
		if _, err := c.Write(long[i:min(i+1000, len(long))]); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := readAll(c); !bytes.Equal(got, resp) || err != io.EOF {
		t.Errorf("long client ID: read %d of %d bytes, err %v", len(got), len(resp), err)
	}

	// A frame too short for a header: only sizes are checked from then on.
	pc = &pipeConn{in: [][]byte{resp, {0xff, 0xff, 0xff, 0xff}}}
	c = Wrap(pc, testAddr, 0, nil)
	if _, err := c.Write([]byte{0, 0, 0, 2, 0, 1}); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(c)
	if !bytes.Equal(got, resp) || !errors.Is(err, ErrRefused) {
		t.Errorf("unparseable request: read %d of %d bytes, err %v; want the response, then the bad size refused", len(got), len(resp), err)
	}
}

func TestGuardedOnce(t *testing.T) {
	c := Wrap(&pipeConn{}, testAddr, 0, nil)
	if Wrap(c, testAddr, 0, nil) != c {
		t.Error("a guarded connection was wrapped again")
	}
}

// FuzzGuardResponses hands arbitrary response bytes to a guarded
// connection after a Metadata and a Produce request, read in each of the
// readers' ways: the guard never panics, every error is a refusal or the
// end of the bytes, every frame it passes on decodes with kmsg, and of a
// frame not passed on at most a size prefix read alone reaches the client.
func FuzzGuardResponses(f *testing.F) {
	for way := range readers {
		f.Add(response(metadataResponse(), 9, 1), uint8(way))
		f.Add(append(response(metadataResponse(), 9, 1), response(kmsg.NewPtrProduceResponse(), 9, 2)...), uint8(way))
		f.Add([]byte("HTTP/1.1 400 Bad Request\r\n"), uint8(way))
		f.Add([]byte{0x7f, 0xff, 0xff, 0xff}, uint8(way))
		f.Add([]byte{0, 0, 0, 8, 0, 0, 0, 1, 1, 0, 0xff, 0xff}, uint8(way))
	}
	f.Fuzz(func(t *testing.T, in []byte, way uint8) {
		rd := readers[int(way)%len(readers)]
		pc := &pipeConn{in: [][]byte{in}}
		c := rd.wrap(pc, 1<<16)
		prod := kmsg.NewPtrProduceRequest()
		prod.Acks = 1
		if _, err := c.Write(append(request(kmsg.NewPtrMetadataRequest(), 9, 1), request(prod, 9, 2)...)); err != nil {
			t.Fatal(err)
		}
		got, err := rd.read(c)
		if !errors.Is(err, ErrRefused) && err != io.EOF && err != io.ErrUnexpectedEOF {
			t.Fatalf("err = %v", err)
		}
		if len(got) > len(in) {
			t.Fatalf("read %d bytes of %d", len(got), len(in))
		}
		keys := []kmsg.Key{kmsg.Metadata, kmsg.Produce}
		for i := 0; len(got) >= 4 && 4+int(binary.BigEndian.Uint32(got)) <= len(got); i++ {
			size := int(binary.BigEndian.Uint32(got))
			body := got[4 : 4+size]
			if i == len(keys) {
				t.Fatalf("a frame passed on beyond the %d responses due", len(keys))
			}
			r := kmsg.ResponseForKey(int16(keys[i]))
			r.SetVersion(9)
			off, err := kframe.SkipTags(body, 4)
			if err != nil || r.ReadFrom(body[off:]) != nil {
				t.Fatalf("frame %d passed on but does not decode", i)
			}
			got = got[4+size:]
		}
		if len(got) > rd.prefixOf(got) {
			t.Fatalf("%d bytes of a frame not passed whole reached the client", len(got))
		}
	})
}

// FuzzGuardRequestSplits sends a stream of requests (Produce with acks 0
// and 1, Metadata, ApiVersions, a 300-byte client ID) cut at arbitrary
// points across Write calls, then reads the responses due: however the
// requests were cut, the guard follows them, and passes every response on
// unchanged.
func FuzzGuardRequestSplits(f *testing.F) {
	f.Add([]byte{1, 7, 30, 200})
	f.Add([]byte{})
	f.Add([]byte{255, 255, 3})
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks = 0
	noAck := request(prod, 9, 1)
	prod.Acks = 1
	ack := request(prod, 7, 2)
	md := request(kmsg.NewPtrMetadataRequest(), 12, 3)
	long := append([]byte(nil), md[:12]...)
	long = binary.BigEndian.AppendUint16(long, 300)
	long = append(long, bytes.Repeat([]byte{'c'}, 300)...)
	long = append(long, md[18:]...)
	binary.BigEndian.PutUint32(long, uint32(len(long)-4))
	binary.BigEndian.PutUint32(long[8:], 4)
	reqs := bytes.Join([][]byte{noAck, ack, md, long, request(kmsg.NewPtrApiVersionsRequest(), 3, 5)}, nil)
	resps := bytes.Join([][]byte{
		response(kmsg.NewPtrProduceResponse(), 7, 2),
		response(metadataResponse(), 12, 3),
		response(metadataResponse(), 12, 4),
		response(kmsg.NewPtrApiVersionsResponse(), 3, 5),
	}, nil)
	f.Fuzz(func(t *testing.T, cuts []byte) {
		pc := &pipeConn{in: [][]byte{resps}}
		c := Wrap(pc, testAddr, 0, nil)
		rest := reqs
		for _, cut := range cuts {
			n := min(int(cut), len(rest))
			if _, err := c.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if _, err := c.Write(rest); err != nil {
			t.Fatal(err)
		}
		if got, err := readAll(c); !bytes.Equal(got, resps) || err != io.EOF {
			t.Fatalf("read %d of %d bytes, err %v", len(got), len(resps), err)
		}
	})
}
