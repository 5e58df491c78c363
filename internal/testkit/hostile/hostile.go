// Package hostile is a loopback Kafka "broker" that misbehaves on purpose,
// for tests of client robustness. A Server speaks just enough of the Kafka
// protocol for kafka-go (Conn, Transport, Client, Writer, Reader) and
// franz-go's kgo to get going (ApiVersions, Metadata, FindCoordinator,
// InitProducerId, Produce, Fetch, ListOffsets, offsets and a one-member
// classic group) and then, at one chosen point, does one hostile thing:
// a negative or huge frame size, a wrong correlation ID, random bytes, a
// response whose arrays or byte strings claim far more than the frame holds,
// an HTTP or TLS answer, or silence.
//
//	s, err := hostile.Start(hostile.MetadataBomb)
//	if err != nil { ... }
//	defer s.Close()
//	w := &kafka.Writer{Addr: kafka.TCP(s.Addr()), Topic: "hostile"}
//	err = w.WriteMessages(ctx, msg) // must fail cleanly: no panic, bounded memory
//
// Tests use it to check that a client does not panic, keeps its memory
// bounded and returns an error that names the cause. Clients may do
// anything with these bytes, so run them in a subprocess when a failure
// would take the test binary down.
//
// Each connection is served on its own goroutine, one request at a time,
// so responses go out in request order even when the client pipelines.
// Every connection misbehaves afresh at the same point: a client that
// reconnects and retries meets the same fault again. Anything the server
// does not model is answered with UNSUPPORTED_VERSION when kmsg can build
// the response with a top-level error code, and otherwise the connection is
// closed.
//
// A Metadata request for all topics lists one topic, "hostile"; a request
// by name finds any topic, with one partition. kafka-go's Transport learns
// topics from the all-topics form, so point kafka-go Writers and Clients at
// topic "hostile", or set Transport.MetadataTopics to the topics they use.
package hostile

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Case is one misbehaviour. Each constant's comment gives the bytes sent,
// where the fault strikes by default and what happens to the connection
// afterwards.
type Case string

const (
	// None answers every request correctly.
	None Case = "none"
	// NegativeSize replaces the target response with the size prefix
	// FF FF FF F0 (-16) and nothing else, then closes the connection (FIN).
	// Default target: the first response of any key.
	NegativeSize Case = "negative-size"
	// HugeSize sends the size prefix 7F FF FF FF (2 GiB - 1) followed by
	// the first 8 bytes of the real response after its size (correlation
	// ID and 4 bytes of body; fewer if the response is shorter), then
	// stays silent, reading and discarding, until the client closes.
	// Default target: the first response of any key.
	HugeSize Case = "huge-size"
	// WrongCorrelation sends the correct target response with correlation
	// ID + 1. The connection stays open and later responses are correct.
	// Default target: the first response of any key.
	WrongCorrelation Case = "wrong-correlation"
	// RandomBody sends a frame of the right size for a 1 KiB body (size
	// prefix 00 00 04 04) with the right correlation ID, followed by 1024
	// pseudo-random bytes from a fixed seed (the same on every run). The
	// connection stays open. Default target: the first response of any key.
	RandomBody Case = "random-body"
	// HeaderTagsBomb sends a 15-byte response (19 bytes on the wire) whose
	// flexible header's tagged-field section claims one tag of
	// 2^63-1 bytes: correlation ID, 01, 00, FF FF FF FF FF FF FF FF 7F.
	// The frame is complete, so the connection stays in sync and open.
	// Default target: the first response whose header is flexible, which
	// ApiVersions responses never are; with At(key), the first flexible
	// response to that key.
	HeaderTagsBomb Case = "header-tags-bomb"
	// ApiVersionsBomb answers ApiVersions with error 0 and an api_keys
	// array count of 2147483647 in a 14-byte frame (15 for the compact
	// encoding of v3+). The connection stays open. Target: key 18.
	ApiVersionsBomb Case = "apiversions-bomb"
	// MetadataBomb answers Metadata with a correct broker list, cluster
	// and controller, then a topics count of 1,000,000 and no topic, in
	// under 70 bytes. The connection stays open. Target: key 3.
	MetadataBomb Case = "metadata-bomb"
	// InitProducerIDBomb answers InitProducerId with correct fields
	// followed, for flexible versions (v2+), by a tagged-field section
	// claiming one tag of 2147483647 bytes; for v0 and v1, the body stops
	// in the middle of the producer ID. The connection stays open.
	// Target: key 22.
	InitProducerIDBomb Case = "initproducerid-bomb"
	// ProduceBomb answers Produce with a topics count of 2147483647 and
	// no topic. Produce requests with acks=0 get no response, as always,
	// so they do not trigger it. The connection stays open. Target: key 0.
	ProduceBomb Case = "produce-bomb"
	// FetchBomb answers Fetch (after its long-poll wait) with a topics
	// count of 2147483647 and no topic. The connection stays open.
	// Target: key 1.
	FetchBomb Case = "fetch-bomb"
	// DescribeGroupsBomb answers DescribeGroups with one Stable group
	// holding one member whose member_metadata claims 2147483647 bytes
	// and is followed by nothing. The connection stays open. Target: key 15.
	DescribeGroupsBomb Case = "describegroups-bomb"
	// HTTP400 answers the first bytes received with nginx's
	// "HTTP/1.1 400 Bad Request" response (headers, "Server: nginx", and a
	// 157-byte HTML body), then closes (FIN).
	// Default target: the first bytes of every connection.
	HTTP400 Case = "http-400"
	// TLSAlert acts like a TLS listener that received plaintext: on the
	// first bytes received it writes the TLS record 15 03 03 00 02 02 32
	// (alert, TLS 1.2, fatal decode_error), then closes (FIN).
	// Default target: the first bytes of every connection.
	TLSAlert Case = "tls-alert"
	// PlaintextForTLS is a plaintext listener met by a TLS client: when the
	// first 4 bytes of a connection are a TLS handshake record header
	// (16 03 ...) it closes the connection at once without writing, as
	// Kafka does when it reads them as a frame size of hundreds of MiB.
	// Otherwise it behaves like None.
	PlaintextForTLS Case = "plaintext-for-tls"
	// Silent accepts connections and reads every request (they show in
	// Requests) but never answers.
	Silent Case = "silent"
)

// Cases returns every case except None, in a stable order.
func Cases() []Case {
	return []Case{
		NegativeSize, HugeSize, WrongCorrelation, RandomBody, HeaderTagsBomb,
		ApiVersionsBomb, MetadataBomb, InitProducerIDBomb, ProduceBomb,
		FetchBomb, DescribeGroupsBomb, HTTP400, TLSAlert, PlaintextForTLS, Silent,
	}
}

// Kafka API keys the server answers.
const (
	keyProduce         int16 = 0
	keyFetch           int16 = 1
	keyListOffsets     int16 = 2
	keyMetadata        int16 = 3
	keyOffsetCommit    int16 = 8
	keyOffsetFetch     int16 = 9
	keyFindCoordinator int16 = 10
	keyJoinGroup       int16 = 11
	keyHeartbeat       int16 = 12
	keyLeaveGroup      int16 = 13
	keySyncGroup       int16 = 14
	keyDescribeGroups  int16 = 15
	keyAPIVersions     int16 = 18
	keyInitProducerID  int16 = 22
)

// served lists the keys advertised in ApiVersions, each at every version
// kmsg knows, except ApiVersions itself (see maxAPIVersions).
var served = []int16{
	keyProduce, keyFetch, keyListOffsets, keyMetadata, keyOffsetCommit,
	keyOffsetFetch, keyFindCoordinator, keyJoinGroup, keyHeartbeat,
	keyLeaveGroup, keySyncGroup, keyDescribeGroups, keyAPIVersions,
	keyInitProducerID,
}

const (
	// maxAPIVersions is the highest ApiVersions version answered; a higher
	// one gets a v0 response with UNSUPPORTED_VERSION and this version, as
	// Kafka does (KIP-511), so that the client retries lower.
	maxAPIVersions int16 = 4
	// maxFetchWait caps the long-poll of an empty Fetch.
	maxFetchWait = 500 * time.Millisecond

	nodeID       int32 = 1
	rack               = "az1"
	clusterID          = "hostile"
	defaultTopic       = "hostile" // the topic list of a Metadata request for all topics
	producerID   int64 = 1000
)

// ownKey is the API each API-specific bomb answers.
var ownKey = map[Case]int16{
	ApiVersionsBomb:    keyAPIVersions,
	MetadataBomb:       keyMetadata,
	InitProducerIDBomb: keyInitProducerID,
	ProduceBomb:        keyProduce,
	FetchBomb:          keyFetch,
	DescribeGroupsBomb: keyDescribeGroups,
}

// anyKey as a target means the first response, whatever its key.
const anyKey int16 = -1

// Option configures Start.
type Option func(*config)

type config struct {
	key    int16
	keySet bool
}

// At makes the misbehaviour hit the first response to API key instead of
// the case's default target. It applies to NegativeSize, HugeSize,
// WrongCorrelation, RandomBody and HeaderTagsBomb (not with key 18, whose
// responses have no header tags); an API-specific bomb accepts only its own
// key, and None, HTTP400, TLSAlert, PlaintextForTLS and Silent, which act on
// the first bytes received, accept none. Start rejects the others.
func At(key int16) Option { return func(c *config) { c.key, c.keySet = key, true } }

// Request is one request the server received.
type Request struct {
	Key, Version  int16
	CorrelationID int32
	ClientID      string
}

// Server is a running hostile broker. It is safe for concurrent use.
type Server struct {
	c      Case
	target int16 // key of the response the fault hits, or anyKey
	ln     net.Listener
	addr   string
	host   string
	port   int32

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	faults atomic.Int64 // hostile replies sent

	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	reqs        []Request
	offsets     map[partitionKey]int64 // next Produce base offset
	names       map[[16]byte]string    // topic ID to name, for every ID handed out
	members     int                    // member IDs handed out
	generations int32                  // JoinGroup answers given
}

type partitionKey struct {
	topic     [16]byte
	partition int32
}

// Start listens on 127.0.0.1:0 and serves case c until Close.
func Start(c Case, opts ...Option) (*Server, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	target, err := targetOf(c, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tcp := ln.Addr().(*net.TCPAddr)
	s := &Server{
		c:       c,
		target:  target,
		ln:      ln,
		addr:    ln.Addr().String(),
		host:    tcp.IP.String(),
		port:    int32(tcp.Port),
		done:    make(chan struct{}),
		conns:   make(map[net.Conn]struct{}),
		offsets: make(map[partitionKey]int64),
		names:   make(map[[16]byte]string),
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// targetOf checks c and the At option and returns the key the fault hits.
func targetOf(c Case, cfg config) (int16, error) {
	if own, ok := ownKey[c]; ok {
		if cfg.keySet && cfg.key != own {
			return 0, fmt.Errorf("hostile: %s answers only api key %d, not %d", c, own, cfg.key)
		}
		return own, nil
	}
	switch c {
	case NegativeSize, HugeSize, WrongCorrelation, RandomBody, HeaderTagsBomb:
		if !cfg.keySet {
			return anyKey, nil
		}
		if kmsg.RequestForKey(cfg.key) == nil {
			return 0, fmt.Errorf("hostile: At(%d): unknown api key", cfg.key)
		}
		if c == HeaderTagsBomb && cfg.key == keyAPIVersions {
			return 0, errors.New("hostile: ApiVersions responses have no header tags to bomb")
		}
		return cfg.key, nil
	case None:
		if cfg.keySet {
			return 0, errors.New("hostile: none has no fault to aim; At does not apply")
		}
		return anyKey, nil
	case HTTP400, TLSAlert, PlaintextForTLS, Silent:
		if cfg.keySet {
			return 0, fmt.Errorf("hostile: %s acts on the first bytes received; At does not apply", c)
		}
		return anyKey, nil
	}
	return 0, fmt.Errorf("hostile: unknown case %q", string(c))
}

// Addr returns the listening address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// Close closes the listener and every connection and waits for the
// server's goroutines to return.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.closeErr = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s.closeErr
}

// Faults returns how many times the server misbehaved: hostile replies
// sent, connections closed on a ClientHello, requests left unanswered.
func (s *Server) Faults() int64 { return s.faults.Load() }

// Requests returns the requests received so far on every connection, in
// the order they were read.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// ending says how a connection goes on after a response.
type ending int

const (
	keepAnswering ending = iota // read and answer the next request
	closeNow                    // close at once
	closeAfter                  // send FIN, then discard input until the client closes
	staySilent                  // write nothing more, discard input until the client closes
)

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	var end ending
	switch s.c {
	case HTTP400, TLSAlert:
		end = s.replyToFirstBytes(c)
	default:
		end = s.converse(c)
	}
	switch end {
	case closeAfter:
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, c)
	case staySilent:
		_, _ = io.Copy(io.Discard, c)
	}
}

// replyToFirstBytes waits for the client's first bytes and answers them
// with the HTTP or TLS reply of the case.
func (s *Server) replyToFirstBytes(c net.Conn) ending {
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return closeNow
	}
	reply := tlsAlert
	if s.c == HTTP400 {
		reply = httpBadRequest
	}
	s.faults.Add(1)
	if _, err := c.Write(reply); err != nil {
		return closeNow
	}
	return closeAfter
}

// converse reads request frames and answers them in order until the
// connection fails or the misbehaviour ends it.
func (s *Server) converse(c net.Conn) ending {
	var size [4]byte
	fired := false // the fault strikes once per connection
	for first := true; ; first = false {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return closeNow
		}
		if first && s.c == PlaintextForTLS && size[0] == 0x16 && size[1] == 0x03 {
			s.faults.Add(1)
			return closeNow
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 0 || n > kproxy.MaxFrameSize {
			if s.c == Silent {
				return staySilent
			}
			return closeNow // as Kafka does with a size out of range
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c, frame); err != nil {
			return closeNow
		}
		h, err := kproxy.ParseRequestHeader(frame)
		if err != nil {
			if s.c == Silent {
				return staySilent
			}
			return closeNow
		}
		s.record(h)
		if s.c == Silent {
			s.faults.Add(1)
			continue
		}
		resp, err := s.answer(h, frame[h.BodyOffset:])
		if err != nil {
			return closeNow
		}
		if resp == nil {
			continue // acks=0 Produce
		}
		if !fired && s.hits(h) {
			fired = true
			s.faults.Add(1)
			out, next := s.misbehave(h, resp)
			if _, err := c.Write(out); err != nil {
				return closeNow
			}
			if next != keepAnswering {
				return next
			}
			continue
		}
		if _, err := c.Write(resp); err != nil {
			return closeNow
		}
	}
}

func (s *Server) record(h kproxy.RequestHeader) {
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Key: h.Key, Version: h.Version, CorrelationID: h.CorrelationID, ClientID: h.ClientID})
	s.mu.Unlock()
}

// hits reports whether the response to h is the one the fault targets.
func (s *Server) hits(h kproxy.RequestHeader) bool {
	if s.target != anyKey && h.Key != s.target {
		return false
	}
	switch s.c {
	case None, PlaintextForTLS:
		return false
	case HeaderTagsBomb:
		return headerFlexible(h.Key, h.Version)
	}
	return true
}

// misbehave returns the bytes to write instead of resp, the correct
// response to h, and how the connection goes on.
func (s *Server) misbehave(h kproxy.RequestHeader, resp []byte) ([]byte, ending) {
	switch s.c {
	case NegativeSize:
		return negativeSize, closeAfter
	case HugeSize:
		return hugeSize(resp), staySilent
	case WrongCorrelation:
		out := append([]byte(nil), resp...)
		binary.BigEndian.PutUint32(out[4:], uint32(h.CorrelationID+1))
		return out, keepAnswering
	case RandomBody:
		return randomBody(h.CorrelationID), keepAnswering
	}
	return bombResponse(s.c, h.Key, h.Version, h.CorrelationID, s.host, s.port), keepAnswering
}

// answer returns the correct response frame to h (size prefix included),
// nil when the request gets none (Produce with acks=0), or an error when
// the connection should be closed: unknown key or version, undecodable
// request, a response kmsg cannot give an error code, or Close.
func (s *Server) answer(h kproxy.RequestHeader, body []byte) ([]byte, error) {
	if h.Key == keyAPIVersions {
		version, resp := s.apiVersions(h.Version)
		return encode(h.Key, version, h.CorrelationID, resp), nil
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
		return nil, fmt.Errorf("key %d v%d: not known to kmsg", h.Key, h.Version)
	}
	req.SetVersion(h.Version)
	var resp kmsg.Response
	if isServed(h.Key) {
		if err := req.ReadFrom(body); err != nil {
			return nil, fmt.Errorf("key %d v%d: %w", h.Key, h.Version, err)
		}
		var err error
		if resp, err = s.handle(req, h.ClientID); err != nil || resp == nil {
			return nil, err
		}
	} else if resp = unsupported(req); resp == nil {
		return nil, fmt.Errorf("key %d: no error code to answer with", h.Key)
	}
	return encode(h.Key, h.Version, h.CorrelationID, resp), nil
}

func isServed(key int16) bool {
	for _, k := range served {
		if k == key {
			return true
		}
	}
	return false
}

// encode frames resp, size prefix included.
func encode(key, version int16, corr int32, resp kmsg.Response) []byte {
	b := kproxy.EncodeResponse(kproxy.Request{Key: key, Version: version, CorrelationID: corr}, resp)
	return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b))), b...)
}

// unsupported returns req's response with its top-level ErrorCode set to
// UNSUPPORTED_VERSION, or nil when the response type has none.
func unsupported(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return nil
	}
	f.SetInt(int64(kerr.UnsupportedVersion.Code))
	return resp
}

// apiVersions returns the version to encode the ApiVersions response in
// and the response.
func (s *Server) apiVersions(version int16) (int16, kmsg.Response) {
	resp := kmsg.NewPtrApiVersionsResponse()
	if version > maxAPIVersions {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: keyAPIVersions, MaxVersion: maxAPIVersions}}
		return 0, resp
	}
	for _, k := range served {
		max := kmsg.RequestForKey(k).MaxVersion()
		if k == keyAPIVersions {
			max = maxAPIVersions
		}
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: max})
	}
	return version, resp
}

// handle answers a decoded request of a served key; nil means no response.
func (s *Server) handle(req kmsg.Request, clientID string) (kmsg.Response, error) {
	switch req := req.(type) {
	case *kmsg.MetadataRequest:
		return s.metadata(req), nil
	case *kmsg.ProduceRequest:
		return s.produce(req), nil
	case *kmsg.FetchRequest:
		return s.fetch(req)
	case *kmsg.ListOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range req.Topics {
			rt := kmsg.ListOffsetsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				rp.OldStyleOffsets = []int64{0}
				rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, 0, 0
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.FindCoordinatorRequest:
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.NodeID, resp.Host, resp.Port = nodeID, s.host, s.port
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{
				Key: k, NodeID: nodeID, Host: s.host, Port: s.port,
			})
		}
		return resp, nil
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = producerID, 0
		return resp, nil
	case *kmsg.OffsetCommitRequest:
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.OffsetFetchRequest:
		return offsetFetch(req), nil
	case *kmsg.JoinGroupRequest:
		return s.joinGroup(req, clientID), nil
	case *kmsg.SyncGroupRequest:
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
		for _, a := range req.GroupAssignment {
			if a.MemberID == req.MemberID {
				resp.MemberAssignment = a.MemberAssignment
			}
		}
		return resp, nil
	case *kmsg.HeartbeatRequest:
		return req.ResponseKind(), nil
	case *kmsg.LeaveGroupRequest:
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		for _, m := range req.Members {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
		return resp, nil
	case *kmsg.DescribeGroupsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.State, rg.ProtocolType, rg.Protocol = g, "Stable", "consumer", "range"
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("key %d: no handler", req.Key())
}

// topicID returns the topic's ID, derived from its name (non-zero and the
// same on every run), and remembers the name for requests by ID.
func (s *Server) topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("hostile topic " + name))
	var id [16]byte
	copy(id[:], sum[:])
	s.mu.Lock()
	s.names[id] = name
	s.mu.Unlock()
	return id
}

func (s *Server) topicName(id [16]byte) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, ok := s.names[id]
	return name, ok
}

// metadata answers with this server as the only broker; every topic asked
// for by name exists with one partition led by it.
func (s *Server) metadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: nodeID, Host: s.host, Port: s.port, Rack: kmsg.StringPtr(rack)}}
	resp.ClusterID = kmsg.StringPtr(clusterID)
	resp.ControllerID = nodeID
	if req.Topics == nil || req.Version == 0 && len(req.Topics) == 0 { // all topics
		resp.Topics = append(resp.Topics, s.metadataTopic(defaultTopic))
	}
	for _, t := range req.Topics {
		if t.Topic != nil && *t.Topic != "" {
			resp.Topics = append(resp.Topics, s.metadataTopic(*t.Topic))
			continue
		}
		if name, ok := s.topicName(t.TopicID); ok {
			resp.Topics = append(resp.Topics, s.metadataTopic(name))
			continue
		}
		rt := kmsg.NewMetadataResponseTopic()
		rt.ErrorCode, rt.Topic, rt.TopicID = kerr.UnknownTopicID.Code, kmsg.StringPtr(""), t.TopicID
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (s *Server) metadataTopic(name string) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID = kmsg.StringPtr(name), s.topicID(name)
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Partition, p.Leader, p.LeaderEpoch = 0, nodeID, 0
	p.Replicas, p.ISR = []int32{nodeID}, []int32{nodeID}
	t.Partitions = []kmsg.MetadataResponseTopicPartition{p}
	return t
}

// produce accepts every record set and returns nil for acks=0.
func (s *Server) produce(req *kmsg.ProduceRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		id := t.TopicID // v13+
		if req.Version < 13 {
			id = s.topicID(t.Topic)
		}
		rt := kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.BaseOffset = s.appendRecords(partitionKey{id, p.Partition}, countRecords(p.Records))
			rp.LogStartOffset = 0
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		return nil
	}
	return resp
}

// appendRecords advances the partition's end offset by n and returns the
// base offset of the records appended.
func (s *Server) appendRecords(k partitionKey, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := s.offsets[k]
	s.offsets[k] = base + n
	return base
}

// countRecords counts the records of a Produce record set: a v2 record
// batch holds its count at byte 57; a v0/v1 message set entry (a
// compressed wrapper included) counts as one.
func countRecords(b []byte) int64 {
	var n int64
	for len(b) >= 17 {
		size := int64(int32(binary.BigEndian.Uint32(b[8:]))) // after base_offset
		if size < 5 || size > int64(len(b)-12) {
			break
		}
		entry := b[:12+size]
		if magic := entry[16]; magic == 2 && len(entry) >= 61 {
			n += max(0, int64(int32(binary.BigEndian.Uint32(entry[57:]))))
		} else {
			n++
		}
		b = b[12+size:]
	}
	return n
}

// fetch long-polls (MaxWaitMillis, at most maxFetchWait, unless MinBytes
// is 0 or nothing is asked) and answers that every partition is empty.
func (s *Server) fetch(req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.FetchResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 0, 0, 0
			rp.PreferredReadReplica = -1
			rp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait); wait > 0 && req.MinBytes > 0 && len(resp.Topics) > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.done:
			return nil, errors.New("server closed")
		}
	}
	return resp, nil
}

// offsetFetch answers that nothing was committed (offset -1).
func offsetFetch(req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, t := range req.Topics { // v0-v7
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range req.Groups { // v8+
		rg := kmsg.OffsetFetchResponseGroup{Group: g.Group}
		for _, t := range g.Topics {
			rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: -1})
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// joinGroup makes the joining member the sole member and leader of a new
// generation, with the first protocol it offers.
func (s *Server) joinGroup(req *kmsg.JoinGroupRequest, clientID string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	member := req.MemberID
	s.mu.Lock()
	if member == "" {
		s.members++
		member = "member-" + strconv.Itoa(s.members)
		if clientID != "" {
			member = clientID + "-" + strconv.Itoa(s.members)
		}
	}
	s.generations++
	resp.Generation = s.generations
	s.mu.Unlock()
	resp.ProtocolType = kmsg.StringPtr(req.ProtocolType)
	resp.Protocol = kmsg.StringPtr("")
	var metadata []byte
	if len(req.Protocols) > 0 {
		resp.Protocol = kmsg.StringPtr(req.Protocols[0].Name)
		metadata = req.Protocols[0].Metadata
	}
	resp.LeaderID, resp.MemberID = member, member
	resp.Members = []kmsg.JoinGroupResponseMember{{MemberID: member, InstanceID: req.InstanceID, ProtocolMetadata: metadata}}
	return resp
}
