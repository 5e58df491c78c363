// Package kproxy is a frame-aware Kafka TCP proxy with fault injection, for
// tests. One Proxy listens on a loopback port in front of one backend broker
// address and forwards every connection to it, decoding the Kafka framing
// (4-byte size, request header) so that hooks can act per request.
//
//	p, err := kproxy.Start(broker)
//	if err != nil { ... }
//	defer p.Close()
//	p.OnRequest(func(r kproxy.Request) kproxy.Action {
//		if r.Key == 0 { // Produce
//			return kproxy.CloseAfter // broker stores it, client sees an error
//		}
//		return kproxy.Forward
//	})
//	w := &kafka.Writer{Addr: kafka.TCP(p.Addr()), Topic: "t"}
//
// The API in one place:
//
//   - Start(backend, opts...) listens on 127.0.0.1:0 (ListenAddr changes it);
//     Addr and Close.
//   - OnRequest(func(Request) Action): per request, Forward, CloseBefore (the
//     broker never sees the request), CloseAfter (the broker handles it, its
//     response is dropped and the connection closed), Reset (TCP RST to the
//     client, SO_LINGER 0, before the broker sees the request) or
//     CorruptRecords (a Produce's records changed in transit: the broker
//     answers CORRUPT_MESSAGE and stores none).
//   - OnResponse(func(Request, []byte) []byte) rewrites responses;
//     DecodeResponse and EncodeResponse convert them to and from kmsg types.
//   - OnResponseCut(func(Request, int) int) relays only the first bytes of
//     a response frame, then closes: the client reads a response cut at a
//     chosen byte.
//   - OnConnect(func(connID) ConnAction): Accept, Refuse (accept then close at
//     once), CloseAfterBytes(n) (relay n client bytes raw, e.g. part of a TLS
//     ClientHello, then close) or Passthrough (raw relay, no framing: for TLS
//     backends). The Raw option makes Passthrough the default.
//   - SetRefusing(true) stops listening so that connects fail with
//     ECONNREFUSED; SetRefusing(false) listens again on the same port.
//   - CloseAll, ResetAll and CloseConn kill live connections; Conns lists them.
//
// Responses are matched to requests with a per-connection FIFO, so clients
// that pipeline requests (kafka-go does) are handled; a Produce request with
// acks=0 gets no response and takes no FIFO slot.
//
// By default the proxy rewrites Metadata and FindCoordinator responses so
// that the backend broker is advertised at the proxy's own address; without
// that, clients would reach the broker directly after their first Metadata
// request. Only the backend broker's entry is rewritten, so the proxy is
// meant for single-broker backends (or for bootstrap-only use).
//
// A Proxy is safe for concurrent use. Hooks run on the connection's relay
// goroutines and must not block for long.
package kproxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request describes one request seen on a proxied connection.
type Request struct {
	ConnID        uint64
	ClientID      string
	Key           int16
	Version       int16
	CorrelationID int32
	// Size is the request frame's size in bytes, size prefix included.
	Size int
	// Acks is the Produce request's acks field; 0 for other keys.
	Acks int16
}

// Action tells the proxy what to do with a request.
type Action int

const (
	// Forward relays the request to the broker and its response back.
	Forward Action = iota
	// CloseBefore closes the connection (FIN) before the broker sees the
	// request.
	CloseBefore
	// CloseAfter relays the request, drops the broker's response and closes
	// the connection: the broker acted, the client cannot know. For a
	// Produce with acks=0 the connection is closed right after relaying.
	CloseAfter
	// Reset aborts the client connection with a TCP RST (SO_LINGER 0)
	// before the broker sees the request: the client sees ECONNRESET.
	Reset
	// CorruptRecords relays a Produce request with one byte of each
	// partition's records changed in transit: its checksum no longer
	// matches, so the broker stores none of it and answers
	// CORRUPT_MESSAGE. Other requests are forwarded.
	CorruptRecords
)

func (a Action) String() string {
	switch a {
	case Forward:
		return "Forward"
	case CloseBefore:
		return "CloseBefore"
	case CloseAfter:
		return "CloseAfter"
	case Reset:
		return "Reset"
	case CorruptRecords:
		return "CorruptRecords"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// ConnAction tells the proxy what to do with a new connection. The zero
// value is Accept.
type ConnAction struct {
	kind  connKind
	bytes int64
}

type connKind int

const (
	connAccept connKind = iota
	connRefuse
	connCloseAfterBytes
	connPassthrough
)

var (
	// Accept relays the connection frame by frame, running the hooks.
	Accept = ConnAction{}
	// Refuse accepts the TCP connection and closes it at once, before any
	// byte is read: the client sees EOF on its first read.
	Refuse = ConnAction{kind: connRefuse}
	// Passthrough relays bytes without reading frames, so no hooks run;
	// for TLS backends.
	Passthrough = ConnAction{kind: connPassthrough}
)

// CloseAfterBytes relays the first n bytes the client sends (raw, both
// directions), then closes the connection: with a TLS backend, a small n
// cuts the handshake.
func CloseAfterBytes(n int64) ConnAction { return ConnAction{kind: connCloseAfterBytes, bytes: n} }

// ConnInfo describes a live connection.
type ConnInfo struct {
	ID       uint64
	ClientID string // from the latest request; "" before the first one
	Remote   string
	Opened   time.Time
	// BytesIn and BytesOut count whole frames, size prefixes included, as
	// they are handed on (client to broker, broker to client): a frame is
	// counted before it is written, so a peer that has read it always sees
	// it counted.
	BytesIn  int64
	BytesOut int64
	Requests int64
}

// Option configures Start.
type Option func(*config)

type config struct {
	listen      string
	logger      *slog.Logger
	dialTimeout time.Duration
	advertise   bool
	raw         bool
}

// ListenAddr sets the listen address. Default: "127.0.0.1:0".
func ListenAddr(addr string) Option { return func(c *config) { c.listen = addr } }

// Logger sets the logger for connection errors. Default: discard.
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// DialTimeout bounds each backend dial. Default: 5s.
func DialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = d } }

// AdvertiseSelf turns the rewriting of Metadata and FindCoordinator
// responses to point at the proxy on or off. Default: on.
func AdvertiseSelf(on bool) Option { return func(c *config) { c.advertise = on } }

// Raw makes Passthrough the default for new connections (OnConnect still
// decides when set): for TLS backends, where frames cannot be read.
func Raw() Option { return func(c *config) { c.raw = true } }

// Proxy is a running proxy. It is safe for concurrent use.
type Proxy struct {
	backend string
	cfg     config
	addr    string // host:port actually listened on

	onRequest  atomic.Pointer[func(Request) Action]
	onResponse atomic.Pointer[func(Request, []byte) []byte]
	onCut      atomic.Pointer[func(Request, int) int]
	onConnect  atomic.Pointer[func(uint64) ConnAction]

	nextID atomic.Uint64
	wg     sync.WaitGroup

	mu     sync.Mutex
	ln     net.Listener // nil while refusing
	conns  map[uint64]*conn
	closed bool
}

// Start listens and relays every accepted connection to backend
// (host:port). Close releases everything.
func Start(backend string, opts ...Option) (*Proxy, error) {
	cfg := config{listen: "127.0.0.1:0", dialTimeout: 5 * time.Second, advertise: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	if _, _, err := net.SplitHostPort(backend); err != nil {
		return nil, fmt.Errorf("kproxy: backend %q: %w", backend, err)
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, fmt.Errorf("kproxy: listen %q: %w", cfg.listen, err)
	}
	p := &Proxy{backend: backend, cfg: cfg, addr: ln.Addr().String(), ln: ln, conns: make(map[uint64]*conn)}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Backend returns the backend address given to Start.
func (p *Proxy) Backend() string { return p.backend }

// OnRequest sets the per-request hook; nil forwards everything.
func (p *Proxy) OnRequest(f func(Request) Action) {
	if f == nil {
		p.onRequest.Store(nil)
		return
	}
	p.onRequest.Store(&f)
}

// OnResponse sets the response rewrite hook; nil leaves responses alone.
// resp is the response frame without its 4-byte size prefix (correlation
// ID, header tags, body); the hook returns the frame to send, in the same
// form, and may return resp itself. It runs after the AdvertiseSelf
// rewrite.
func (p *Proxy) OnResponse(f func(req Request, resp []byte) []byte) {
	if f == nil {
		p.onResponse.Store(nil)
		return
	}
	p.onResponse.Store(&f)
}

// OnResponseCut sets the response-cut hook; nil relays every response
// whole. For each response frame, after any OnResponse rewrite, f gets the
// request and the frame's size in bytes (4-byte size prefix included) and
// returns how many of its first bytes to relay before closing the
// connection. A negative value, or one of at least the frame's size,
// relays the whole frame and keeps the connection: the client reads a
// response cut at the chosen byte, then EOF. The broker has handled the
// request.
func (p *Proxy) OnResponseCut(f func(req Request, frameSize int) int) {
	if f == nil {
		p.onCut.Store(nil)
		return
	}
	p.onCut.Store(&f)
}

// OnConnect sets the new-connection hook; nil accepts.
func (p *Proxy) OnConnect(f func(connID uint64) ConnAction) {
	if f == nil {
		p.onConnect.Store(nil)
		return
	}
	p.onConnect.Store(&f)
}

// SetRefusing(true) closes the listener so that new connects fail with
// ECONNREFUSED, leaving live connections alone; SetRefusing(false) listens
// again on the same port. It errs if the port was taken meanwhile.
func (p *Proxy) SetRefusing(refuse bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("kproxy: closed")
	}
	if refuse {
		if p.ln != nil {
			_ = p.ln.Close()
			p.ln = nil
		}
		return nil
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("kproxy: listen again on %q: %w", p.addr, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// CloseAll closes every live connection (FIN to the client).
func (p *Proxy) CloseAll() { p.each(func(c *conn) { c.close() }) }

// ResetAll aborts every live connection with a TCP RST to the client.
func (p *Proxy) ResetAll() { p.each(func(c *conn) { c.reset() }) }

// CloseConn closes the connection with the given ID and reports whether it
// was live.
func (p *Proxy) CloseConn(id uint64) bool {
	p.mu.Lock()
	c := p.conns[id]
	p.mu.Unlock()
	if c == nil {
		return false
	}
	c.close()
	return true
}

// Conns lists live connections, in no particular order.
func (p *Proxy) Conns() []ConnInfo {
	var out []ConnInfo
	p.each(func(c *conn) { out = append(out, c.info()) })
	return out
}

func (p *Proxy) each(f func(*conn)) {
	p.mu.Lock()
	cs := make([]*conn, 0, len(p.conns))
	for _, c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		f(c)
	}
}

// Close stops listening, closes every connection and waits for all relay
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.CloseAll()
	p.wg.Wait()
	return nil
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return // listener closed (Close or SetRefusing)
		}
		id := p.nextID.Add(1)
		c := &conn{p: p, id: id, client: nc, opened: time.Now()}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = nc.Close()
			return
		}
		p.conns[id] = c
		p.wg.Add(1)
		p.mu.Unlock()
		go c.serve()
	}
}

func (p *Proxy) forget(id uint64) {
	p.mu.Lock()
	delete(p.conns, id)
	p.mu.Unlock()
}

// conn is one proxied connection.
type conn struct {
	p       *Proxy
	id      uint64
	client  net.Conn
	opened  time.Time
	backend atomic.Pointer[net.Conn]

	clientID atomic.Pointer[string]
	in, out  atomic.Int64
	requests atomic.Int64

	once   sync.Once
	killed atomic.Bool // close has run

	mu      sync.Mutex
	pending []pending // requests awaiting a response, oldest first
}

type pending struct {
	req        Request
	closeAfter bool
}

func (c *conn) info() ConnInfo {
	ci := ConnInfo{ID: c.id, Remote: c.client.RemoteAddr().String(), Opened: c.opened,
		BytesIn: c.in.Load(), BytesOut: c.out.Load(), Requests: c.requests.Load()}
	if s := c.clientID.Load(); s != nil {
		ci.ClientID = *s
	}
	return ci
}

func (c *conn) close() {
	c.once.Do(func() {
		c.killed.Store(true)
		_ = c.client.Close()
		if b := c.backend.Load(); b != nil {
			_ = (*b).Close()
		}
	})
}

func (c *conn) reset() {
	if tc, ok := c.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.close()
}

func (c *conn) serve() {
	defer c.p.wg.Done()
	defer c.p.forget(c.id)
	defer c.close()

	action := Accept
	if c.p.cfg.raw {
		action = Passthrough
	}
	if f := c.p.onConnect.Load(); f != nil {
		action = (*f)(c.id)
	}
	if action.kind == connRefuse {
		return
	}
	bc, err := net.DialTimeout("tcp", c.p.backend, c.p.cfg.dialTimeout)
	if err != nil {
		c.p.cfg.logger.Warn("kproxy: backend dial failed", "conn", c.id, "backend", c.p.backend, "err", err)
		return
	}
	c.backend.Store(&bc)
	if c.killed.Load() { // closed while dialing: close has not seen bc
		_ = bc.Close()
		return
	}

	done := make(chan struct{})
	switch action.kind {
	case connPassthrough:
		go func() { defer close(done); c.copyRaw(c.client, bc, &c.out, -1) }()
		c.copyRaw(bc, c.client, &c.in, -1)
		<-done
	case connCloseAfterBytes:
		go func() { defer close(done); c.copyRaw(c.client, bc, &c.out, -1) }()
		c.copyRaw(bc, c.client, &c.in, action.bytes)
	default:
		go func() { defer close(done); c.responses(bc) }()
		c.requestsLoop(bc)
	}
	c.close()
	<-done
}

// copyRaw relays bytes from src to dst. With limit >= 0 it stops after
// limit bytes and closes the connection; otherwise it propagates the end of
// src as a half-close of dst, and closes the connection on errors.
func (c *conn) copyRaw(dst, src net.Conn, counter *atomic.Int64, limit int64) {
	var r io.Reader = src
	if limit >= 0 {
		r = io.LimitReader(src, limit)
	}
	n, err := io.Copy(dst, r)
	counter.Add(n)
	if limit >= 0 || err != nil {
		c.close()
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	c.close()
}

// requestsLoop relays client frames to the broker, applying OnRequest.
func (c *conn) requestsLoop(bc net.Conn) {
	var sizeBuf [4]byte
	for {
		frame, err := readFrame(c.client, sizeBuf[:])
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				c.p.cfg.logger.Warn("kproxy: bad request frame", "conn", c.id, "err", err)
			}
			return
		}
		c.in.Add(int64(len(frame)))
		h, err := ParseRequestHeader(frame[4:])
		if err != nil {
			c.p.cfg.logger.Warn("kproxy: bad request header", "conn", c.id, "err", err)
			return
		}
		c.requests.Add(1)
		if h.ClientID != "" {
			if old := c.clientID.Load(); old == nil || *old != h.ClientID {
				id := h.ClientID
				c.clientID.Store(&id)
			}
		}
		req := Request{ConnID: c.id, ClientID: h.ClientID, Key: h.Key, Version: h.Version,
			CorrelationID: h.CorrelationID, Size: len(frame)}
		expectResponse := true
		if h.Key == keyProduce {
			acks, err := produceAcks(h.Version, frame[4+h.BodyOffset:])
			if err != nil {
				c.p.cfg.logger.Warn("kproxy: bad produce request", "conn", c.id, "err", err)
				return
			}
			req.Acks = acks
			expectResponse = acks != 0
		}
		action := Forward
		if f := c.p.onRequest.Load(); f != nil {
			action = (*f)(req)
		}
		switch action {
		case CloseBefore:
			return
		case Reset:
			c.reset()
			return
		case CorruptRecords:
			if h.Key == keyProduce {
				if frame, err = corruptRecords(frame, h); err != nil {
					c.p.cfg.logger.Warn("kproxy: bad produce request", "conn", c.id, "err", err)
					return
				}
			}
		}
		if expectResponse {
			c.mu.Lock()
			c.pending = append(c.pending, pending{req: req, closeAfter: action == CloseAfter})
			c.mu.Unlock()
		}
		if _, err := bc.Write(frame); err != nil {
			return
		}
		if !expectResponse && action == CloseAfter {
			// Half-close so that the broker still reads the request.
			if tc, ok := bc.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			_ = c.client.Close()
			return
		}
	}
}

// responses relays broker frames to the client, matching each to the
// oldest pending request.
func (c *conn) responses(bc net.Conn) {
	defer c.close()
	var sizeBuf [4]byte
	for {
		frame, err := readFrame(bc, sizeBuf[:])
		if err != nil {
			return
		}
		if len(frame) < 8 {
			c.p.cfg.logger.Warn("kproxy: response shorter than a correlation id", "conn", c.id)
			return
		}
		corr := int32(uint32(frame[4])<<24 | uint32(frame[5])<<16 | uint32(frame[6])<<8 | uint32(frame[7]))
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.mu.Unlock()
			c.p.cfg.logger.Warn("kproxy: response without a request", "conn", c.id, "correlation_id", corr)
			return
		}
		pr := c.pending[0]
		c.pending = c.pending[1:]
		c.mu.Unlock()
		if pr.req.CorrelationID != corr {
			c.p.cfg.logger.Warn("kproxy: response out of order", "conn", c.id, "want", pr.req.CorrelationID, "got", corr)
			return
		}
		if pr.closeAfter {
			return
		}
		out := frame
		if body := c.p.rewrite(pr.req, frame[4:]); !sameSlice(body, frame[4:]) {
			out = make([]byte, 4+len(body))
			out[0], out[1], out[2], out[3] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
			copy(out[4:], body)
		}
		if f := c.p.onCut.Load(); f != nil {
			if n := (*f)(pr.req, len(out)); n >= 0 && n < len(out) {
				c.out.Add(int64(n))
				_, _ = c.client.Write(out[:n])
				return // the deferred close ends the connection mid-frame
			}
		}
		c.out.Add(int64(len(out)))
		if _, err := c.client.Write(out); err != nil {
			return
		}
	}
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (p *Proxy) rewrite(req Request, resp []byte) []byte {
	if p.cfg.advertise && (req.Key == keyMetadata || req.Key == keyFindCoordinator) {
		resp = p.advertiseSelf(req, resp)
	}
	if f := p.onResponse.Load(); f != nil {
		resp = (*f)(req, resp)
	}
	return resp
}

// advertiseSelf points the backend broker's entries at the proxy.
func (p *Proxy) advertiseSelf(req Request, resp []byte) []byte {
	r, err := DecodeResponse(req, resp)
	if err != nil {
		p.cfg.logger.Warn("kproxy: cannot decode response to rewrite it", "err", err)
		return resp
	}
	host, portStr, _ := net.SplitHostPort(p.addr)
	port64, _ := strconv.ParseInt(portStr, 10, 32)
	port := int32(port64)
	isBackend := func(h string, pt int32) bool {
		return net.JoinHostPort(h, strconv.Itoa(int(pt))) == p.backend
	}
	switch r := r.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			if len(r.Brokers) == 1 || isBackend(b.Host, b.Port) {
				b.Host, b.Port = host, port
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.ErrorCode == 0 && isBackend(r.Host, r.Port) {
			r.Host, r.Port = host, port
		}
		for i := range r.Coordinators {
			co := &r.Coordinators[i]
			if co.ErrorCode == 0 && isBackend(co.Host, co.Port) {
				co.Host, co.Port = host, port
			}
		}
	}
	return EncodeResponse(req, r)
}
