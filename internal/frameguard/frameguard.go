// Package frameguard checks the responses a Kafka client reads from a
// connection before the client's decoder sees them.
//
// Every connection the SDK dials goes through a guard. It reads each
// response's 4-byte size prefix and refuses a size that is negative,
// smaller than a correlation ID or larger than the limit, so that no
// decoder allocates for a size a broker did not mean. It then reads the
// response whole, checks that its correlation ID is the one due, and
// decodes it with kmsg for its request's API key and version, whose
// decoder never takes a length or count beyond the bytes at hand; only a
// response that decodes is passed on. A client whose read cannot hold a
// whole frame gets the checked size prefix first; a body it then reads
// into one buffer (kgo does) is read there and checked before the read
// returns. kafka-go's decoder, which trusts
// every count, then never meets one larger than the frame, and kgo's
// errors name what was wrong.
//
// A refusal closes the connection and is returned by every later Read
// and Write as an *Error, which names the address and what was wrong.
package frameguard

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
)

// DefaultMaxResponseBytes is the default limit on a response's size: 100
// MiB, the default of a broker's socket.request.max.bytes and of kgo's
// BrokerMaxReadBytes, twice kgo's default fetch.max.bytes (50 MiB, the
// largest fetch the SDK's Reader asks for unless configured otherwise).
const DefaultMaxResponseBytes = 100 << 20

// LimitVar is the environment variable that sets the limit.
const LimitVar = "AZKAFKA_MAX_RESPONSE_BYTES"

// ErrRefused is matched (errors.Is) by every *Error.
var ErrRefused = errors.New("response refused")

// Error is a refusal: the bytes Addr sent were not a Kafka response the
// client may read.
type Error struct {
	// Addr is the broker's address.
	Addr string
	// Reason says what was wrong, in words an operator acts on.
	Reason string
}

func (e *Error) Error() string { return e.Addr + ": " + e.Reason }

// Is reports whether target is ErrRefused.
func (e *Error) Is(target error) bool { return target == ErrRefused }

// minResponse is the smallest response: a correlation ID.
const minResponse = 4

// keepBuffer is the largest frame buffer a connection keeps for the next
// response; a larger one is dropped once served.
const keepBuffer = 8 << 20

// firstBuffer is the most a frame buffer takes before the bytes arrive: a
// size prefix claiming more costs this much until they do.
const firstBuffer = 1 << 20

// Wrap returns c guarded, with responses larger than limit bytes
// refused (limit <= 0: DefaultMaxResponseBytes). addr names the broker in
// errors. onRefuse, when not nil, is called with each refusal. A
// connection Wrap already guards is returned as it is.
func Wrap(c net.Conn, addr string, limit int, onRefuse func(*Error)) net.Conn {
	if _, ok := c.(*Conn); ok {
		return c
	}
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	return &Conn{Conn: c, addr: addr, limit: limit, direct: directMin, br: bufio.NewReader(c), onRefuse: onRefuse}
}

// Conn is a guarded connection. Safe for one reader and one writer at a
// time, as a net.Conn under a Kafka client is used.
type Conn struct {
	net.Conn
	addr     string
	limit    int
	direct   int // directMin, but in tests
	onRefuse func(*Error)

	failed atomic.Pointer[Error]
	// pass is set when the client itself started TLS on the connection
	// (its first bytes are a TLS record): the guard cannot read the
	// frames then and steps aside.
	pass atomic.Bool

	wmu sync.Mutex
	w   requestScanner

	qmu sync.Mutex
	q   []pending // requests whose responses are due, in order, from q[qh]
	qh  int

	// unsure is set when a request could not be followed: the
	// responses' order is unknown then, and only their sizes are checked.
	unsure atomic.Bool

	rmu   sync.Mutex
	br    *bufio.Reader
	frame []byte // the current frame as read so far, size prefix included
	need  int    // the current frame's length; 0 between frames
	off   int    // bytes of frame served
	// body is the size of the current frame's body when its size prefix
	// was served alone and the body is to be read straight into the
	// caller's buffer (see readValidated); 0 otherwise.
	body  int
	resps []kmsg.Response // decoded into, one per API key met

	// readDeadline is the caller's read deadline (unix nanoseconds, 0
	// for none), which a body read past it restores (see bodyStall).
	readDeadline atomic.Int64
}

// bodyStall is how long a frame's body may go without a byte arriving
// once the caller's read deadline has passed inside it. The guard reads a
// frame whole in the read that began it, where kafka-go, which set its
// deadline for the response's header (MaxWait plus a margin), would have
// read the body on under a deadline per message (ReadBatchTimeout, 10 s by
// default): a large fetch response still arriving at the deadline is read
// on while its bytes keep coming, so that it is not refused and fetched
// again for ever.
const bodyStall = 10 * time.Second

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error {
	c.noteReadDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.noteReadDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *Conn) noteReadDeadline(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	c.readDeadline.Store(ns)
}

// bodyReader reads a frame's body on past the caller's read deadline
// while its bytes keep coming (see bodyStall).
type bodyReader struct {
	c        *Conn
	progress bool  // bytes came since the body began or the last extension
	extended bool  // the deadline was moved past the caller's
	deadline int64 // the caller's read deadline when the body began
}

func newBodyReader(c *Conn) bodyReader {
	return bodyReader{c: c, deadline: c.readDeadline.Load()}
}

// read reads into p. A timeout after bytes came moves the deadline
// bodyStall ahead and reports no error; one with no byte since is
// returned, and so is one after the caller moved its deadline since the
// body began: a client ends a read so (kgo sets the deadline to now when
// it closes, or when a request's ctx ends), and that is not a slow body.
func (b *bodyReader) read(p []byte) (int, error) {
	m, err := b.c.br.Read(p)
	if m > 0 {
		b.progress = true
	}
	var ne net.Error
	if err != nil && b.progress && errors.As(err, &ne) && ne.Timeout() && !b.moved() {
		b.progress, b.extended = false, true
		if derr := b.c.Conn.SetReadDeadline(time.Now().Add(bodyStall)); derr != nil {
			return m, err
		}
		// The caller notes its deadline before setting it: one moved
		// meanwhile is either seen here or set after the extension.
		if b.moved() {
			b.done()
			return m, err
		}
		return m, nil
	}
	return m, err
}

// moved reports whether the caller set another read deadline since the
// body began.
func (b *bodyReader) moved() bool { return b.c.readDeadline.Load() != b.deadline }

// done gives the connection the caller's deadline back.
func (b *bodyReader) done() {
	if !b.extended {
		return
	}
	var t time.Time
	if ns := b.c.readDeadline.Load(); ns != 0 {
		t = time.Unix(0, ns)
	}
	b.c.Conn.SetReadDeadline(t)
}

// pending is a request whose response is due.
type pending struct {
	key, version int16
	corr         int32
}

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if e := c.failed.Load(); e != nil {
		return 0, e
	}
	if c.pass.Load() {
		return c.br.Read(p)
	}
	return c.readValidated(p)
}

// nextSize peeks at the next frame's size prefix and checks it.
func (c *Conn) nextSize() (int, error) {
	b, err := c.br.Peek(4)
	if err != nil {
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(b))
	if size >= minResponse && int64(size) <= int64(c.limit) {
		return int(size), nil
	}
	head, _ := c.br.Peek(min(c.br.Buffered(), 64))
	return 0, c.refuse(sizeReason(head, size, c.limit))
}

// sizeReason says why a frame beginning with head (its size prefix first)
// is refused.
func sizeReason(head []byte, size int32, limit int) string {
	switch {
	case looksLikeTLS(head):
		return "a TLS record on a plaintext connection: the port speaks TLS; set TLS in the Dialer or Transport"
	case looksLikeText(head):
		return fmt.Sprintf("not a Kafka broker: its reply begins %q", textPrefix(head))
	case size < 0:
		return fmt.Sprintf("negative response size %d: not a Kafka response", size)
	case size < minResponse:
		return fmt.Sprintf("response of %d bytes is shorter than a correlation ID: not a Kafka response", size)
	default:
		return fmt.Sprintf("response of %d bytes exceeds the %d-byte limit (%s)", size, limit, LimitVar)
	}
}

// looksLikeTLS reports whether b begins with a TLS record header:
// content type 20-23 (change cipher spec, alert, handshake, data), major
// version 3.
func looksLikeTLS(b []byte) bool {
	return len(b) >= 3 && b[0] >= 20 && b[0] <= 23 && b[1] == 3 && b[2] <= 4
}

// looksLikeText reports whether b's first 4 bytes are printable ASCII, as
// an HTTP, SMTP or Redis reply is; as a size they are at least 538976288.
func looksLikeText(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	for _, c := range b[:4] {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// textPrefix is b up to its first line end, at most 40 printable bytes.
func textPrefix(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c == '\r' || c == '\n' || sb.Len() == 40 || c > unicode.MaxASCII || !unicode.IsPrint(rune(c)) {
			break
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// readValidated serves p from the current frame, reading and checking the
// next one first when the current one is served. A read error (a
// deadline) leaves what was read in place, and the next call goes on.
//
// A read at the start of a large frame (a body over directMin bytes) that
// cannot hold it gets its checked size prefix alone. When the next read's
// buffer holds the whole body (kgo reads a body into a buffer of its
// size), the body is read straight into it and checked there before the
// call returns: no copy of the frame is made, and no byte of a body that
// does not decode is handed out. A shorter read falls back to the frame
// buffer.
func (c *Conn) readValidated(p []byte) (int, error) {
	if c.body > 0 {
		if len(p) >= c.body {
			return c.readBody(p[:c.body])
		}
		c.toFrame(nil)
	}
	if c.need == 0 {
		size, err := c.nextSize()
		if err != nil {
			return 0, err
		}
		if size > c.direct && len(p) >= 4 && len(p) < 4+size {
			// A large frame that does not fit: the prefix alone, and
			// the body straight into the next read's buffer if it
			// holds it.
			b, _ := c.br.Peek(4) // buffered: nextSize peeked it
			copy(p, b)
			c.br.Discard(4)
			c.body = size
			return 4, nil
		}
		c.need, c.off = 4+size, 0
		if cap(c.frame) < min(c.need, firstBuffer) {
			c.frame = make([]byte, 0, min(c.need, firstBuffer))
		}
		c.frame = c.frame[:0]
	}
	if len(c.frame) < c.need {
		if err := c.fill(); err != nil {
			return 0, err
		}
		if err := c.check(c.frame[4:], keepBuffer); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.frame[c.off:])
	c.off += n
	if c.off == c.need {
		c.need = 0
		if cap(c.frame) > keepBuffer {
			c.frame = nil
		}
	}
	return n, nil
}

// readBody reads the body whose size prefix was served into p (its
// length), and checks it. A read error keeps what was read in the frame
// buffer, where the next call goes on.
func (c *Conn) readBody(p []byte) (int, error) {
	br := newBodyReader(c)
	n := 0
	var err error
	for n < len(p) && err == nil {
		var m int
		m, err = br.read(p[n:])
		n += m
	}
	br.done()
	if err != nil {
		c.toFrame(p[:n])
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the peer closed inside a frame
		}
		return 0, err
	}
	c.body = 0
	// The decoded response would alias p, the caller's buffer: not kept.
	if err := c.check(p, 0); err != nil {
		return 0, err
	}
	return len(p), nil
}

// directMin is the smallest body read straight into a caller's buffer; a
// smaller one is read whole before any of it is handed out, size prefix
// included, and copied.
const directMin = 64 << 10

// toFrame moves a body being read into the caller's buffer to the frame
// buffer: the size prefix, served, and got, the body's bytes read so far.
func (c *Conn) toFrame(got []byte) {
	c.need, c.off = 4+c.body, 4
	c.body = 0
	if want := max(min(c.need, firstBuffer), 4+len(got)); cap(c.frame) < want {
		c.frame = make([]byte, 0, want)
	}
	c.frame = binary.BigEndian.AppendUint32(c.frame[:0], uint32(c.need-4))
	c.frame = append(c.frame, got...)
}

// fill reads the rest of the current frame. The buffer grows with what
// arrives, not with what the size prefix claims.
func (c *Conn) fill() error {
	br := newBodyReader(c)
	defer br.done()
	for len(c.frame) < c.need {
		if len(c.frame) == cap(c.frame) {
			grown := make([]byte, len(c.frame), min(c.need, max(2*cap(c.frame), 4<<10)))
			copy(grown, c.frame)
			c.frame = grown
		}
		m, err := br.read(c.frame[len(c.frame):min(cap(c.frame), c.need)])
		c.frame = c.frame[:len(c.frame)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the peer closed inside a frame
			}
			return err
		}
	}
	return nil
}

// check matches body, a whole response after its size prefix, with the
// request due and decodes it with kmsg. The decoded response, which
// aliases body, is kept for the next response of its key unless body is
// longer than keep.
func (c *Conn) check(body []byte, keep int) error {
	corr := int32(binary.BigEndian.Uint32(body))
	c.qmu.Lock()
	if c.qh == len(c.q) {
		c.qmu.Unlock()
		if c.unsure.Load() {
			return nil
		}
		return c.refuse(fmt.Sprintf("a response (correlation ID %d) to no request: the connection is out of step", corr))
	}
	p := c.q[c.qh]
	if c.qh++; c.qh == len(c.q) {
		c.q, c.qh = c.q[:0], 0
	}
	c.qmu.Unlock()
	if c.unsure.Load() {
		return nil
	}
	name := kmsg.NameForKey(p.key)
	if corr != p.corr {
		return c.refuse(fmt.Sprintf("a response with correlation ID %d where %d (%s v%d) was due: the connection is out of step", corr, p.corr, name, p.version))
	}
	resp := c.response(p.key)
	if resp == nil {
		return nil
	}
	resp.SetVersion(p.version)
	off := minResponse
	if kframe.ResponseHeaderFlexible(p.key, p.version) {
		end, err := kframe.SkipTags(body, off)
		if err != nil {
			return c.refuse(fmt.Sprintf("malformed %s v%d response header (%d bytes): its tagged fields run past its end", name, p.version, len(body)))
		}
		off = end
	}
	// Unsafe: strings alias body, and the response is dropped with a body
	// the connection does not keep.
	err := resp.(kmsg.UnsafeReadFrom).UnsafeReadFrom(body[off:])
	if len(body) > keep {
		c.forget(p.key)
	}
	if err != nil {
		if p.key == int16(kmsg.ApiVersions) && p.version > 0 && unsupportedVersions(body[minResponse:]) {
			return nil // a broker answers a version it does not know in v0
		}
		return c.refuse(fmt.Sprintf("malformed %s v%d response (%d bytes): a length or count in it runs past its end", name, p.version, len(body)))
	}
	return nil
}

// response returns the connection's kmsg response for key, reused from
// one response to the next so that checking allocates little; nil for a
// key kmsg does not know. Called with rmu held.
func (c *Conn) response(key int16) kmsg.Response {
	for _, r := range c.resps {
		if r.Key() == key {
			return r
		}
	}
	r := kmsg.ResponseForKey(key)
	if r != nil {
		c.resps = append(c.resps, r)
	}
	return r
}

func (c *Conn) forget(key int16) {
	c.resps = slices.DeleteFunc(c.resps, func(r kmsg.Response) bool { return r.Key() == key })
}

// unsupportedVersions reports whether b is an ApiVersions v0 body with
// error UNSUPPORTED_VERSION: a broker's answer to a newer ApiVersions.
func unsupportedVersions(b []byte) bool {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 0
	return r.ReadFrom(b) == nil && r.ErrorCode == 35
}

// refuse records reason as the connection's error and closes it.
func (c *Conn) refuse(reason string) error {
	e := &Error{Addr: c.addr, Reason: reason}
	if !c.failed.CompareAndSwap(nil, e) {
		return c.failed.Load()
	}
	c.Conn.Close()
	if c.onRefuse != nil {
		c.onRefuse(e)
	}
	return e
}

// Write implements net.Conn. The requests in p are noted
// before they are sent, so that their responses are due when they come.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if e := c.failed.Load(); e != nil {
		return 0, e
	}
	if !c.w.started {
		c.w.started = true
		if len(p) >= 2 && p[0] == 22 && p[1] == 3 {
			c.pass.Store(true) // the client runs TLS on top
		}
	}
	if !c.pass.Load() && !c.unsure.Load() {
		c.scan(p)
	}
	return c.Conn.Write(p)
}

// maxHead is the most of a request the scanner keeps to parse its header
// and, for Produce, its acks: two int16-length strings and the fixed
// fields.
const maxHead = 70_000

// requestScanner follows the request frames across Write calls.
type requestScanner struct {
	started bool
	sizeBuf [4]byte
	nsize   int    // bytes of sizeBuf filled
	size    int    // the current frame's size
	done    int    // bytes of the current frame seen
	head    []byte // the current frame's first bytes
	want    int    // len(head) at which to parse; 0 once parsed
}

// scan notes the requests whose headers p completes.
func (c *Conn) scan(p []byte) {
	s := &c.w
	for len(p) > 0 {
		if s.nsize < 4 {
			k := copy(s.sizeBuf[s.nsize:], p)
			s.nsize += k
			p = p[k:]
			if s.nsize < 4 {
				return
			}
			s.size = int(int32(binary.BigEndian.Uint32(s.sizeBuf[:])))
			if s.size <= 0 {
				c.unsure.Store(true)
				return
			}
			s.done, s.head, s.want = 0, s.head[:0], min(s.size, 256)
			continue
		}
		k := min(len(p), s.size-s.done)
		if s.want > 0 { // len(s.head) == s.done
			k = min(k, s.want-len(s.head))
			s.head = append(s.head, p[:k]...)
			if len(s.head) == s.want {
				c.noteRequest()
			}
		}
		s.done += k
		p = p[k:]
		if s.done == s.size {
			if s.want > 0 { // the frame ended before its header parsed
				c.unsure.Store(true)
				return
			}
			s.nsize = 0
			if cap(s.head) > 4<<10 {
				s.head = nil
			}
		}
	}
}

// noteRequest parses the head of the current request: once it holds the
// header (and a Produce request's acks) the response is queued as due,
// unless acks is 0; else the scanner asks for more bytes, up to maxHead.
func (c *Conn) noteRequest() {
	s := &c.w
	h, err := kframe.ParseRequestHeaderNoID(s.head)
	var acks int16 = -1
	if err == nil && h.Key == int16(kmsg.Produce) {
		acks, err = kframe.ProduceAcks(h.Version, s.head[h.BodyOffset:])
	}
	if err != nil {
		if s.want < min(s.size, maxHead) {
			s.want = min(s.size, maxHead, 2*s.want)
			return
		}
		// A request the guard cannot follow: from here on only the
		// sizes of the responses are checked.
		c.unsure.Store(true)
		s.want = 0
		return
	}
	s.want = 0
	if acks == 0 {
		return // no response comes
	}
	c.qmu.Lock()
	c.q = append(c.q, pending{key: h.Key, version: h.Version, corr: h.CorrelationID})
	c.qmu.Unlock()
}

// Close implements net.Conn.
func (c *Conn) Close() error { return c.Conn.Close() }
