package sdk

// reader_coord.go holds the Reader's own connection to its group's
// coordinator, which synchronous commits are written and read on, on the
// caller's goroutine (see coordConn).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
	"github.com/azkafka/azkafka/metrics"
)

// coordConn is a connection of the Reader's own to its group's
// coordinator, dialed as the engine dials (the connection policy, the
// Dialer's TLS and resolver, the frame guard, the client ID), for the
// OffsetCommit requests of commitDirect. Through the engine a request is
// handed to the broker's writer goroutine and its response read by
// another: about 110 µs more per round trip on Kafka
// (BenchmarkOffsetCommitPath), which a commit per message pays. Here the
// caller writes the request and reads the response itself, as kafka-go's
// commit loop does. Whatever goes wrong on it (the dial, the connection, a
// coordinator that moved) closes it, and that commit goes through the
// engine, which finds the coordinator again; the next commit dials anew,
// after a pause when the dial failed. Not with SASL: commits then go
// through the engine.
type coordConn struct {
	mu sync.Mutex // guards c against Close; commitMu orders its use
	c  net.Conn
	br *bufio.Reader
	// version is the OffsetCommit version: the highest the coordinator
	// and this client both know.
	version int16
	corr    int32
	// retryAt is when a dial may be tried again after one failed.
	retryAt time.Time
	closed  bool
	sent    int64 // commits answered on it
}

// coordDialPause is how long commits go through the engine after the
// dial of a coordinator connection failed.
const coordDialPause = 5 * time.Second

// coordRequestTimeout bounds a commit's round trip on the connection when
// its ctx has no sooner deadline; past it, the commit goes through the
// engine.
const coordRequestTimeout = 30 * time.Second

// maxCoordResponse bounds a response read on the coordinator connection:
// an OffsetCommit answer of every partition of many topics is far below.
const maxCoordResponse = 16 << 20

// errCoordConn marks a failure of the coordinator connection: the commit
// goes through the engine.
var errCoordConn = errors.New("sdk: the coordinator connection failed")

// coordCommit sends req on the coordinator connection, dialing it first
// when there is none. Its error wraps errCoordConn when the commit should
// go through the engine instead; ctx's error when ctx ended.
func (r *Reader) coordCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	cc := &r.coord
	cc.mu.Lock()
	c, br := cc.c, cc.br
	closed := cc.closed
	cc.mu.Unlock()
	if closed {
		return nil, errCoordConn
	}
	if c == nil {
		var err error
		if c, br, err = r.dialCoordinator(ctx); err != nil {
			return nil, err
		}
	}
	req.SetVersion(cc.version)
	cc.corr++
	resp := kmsg.NewPtrOffsetCommitResponse()
	if err := roundTrip(ctx, c, br, r.s.clientID, cc.corr, req, resp); err != nil {
		r.dropCoordinator(c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Waited out: the engine commits instead.
		r.absorb(metrics.OpCommit, fmt.Errorf("the connection to the coordinator: %w", err))
		return nil, fmt.Errorf("%w: %w", errCoordConn, err)
	}
	cc.sent++
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			switch kerr.ErrorForCode(p.ErrorCode) {
			case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
				// Moved, or not ready: the engine finds it again.
				r.dropCoordinator(c)
				return nil, fmt.Errorf("%w: %w", errCoordConn, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return resp, nil
}

// dialCoordinator finds the group's coordinator through the engine, dials
// it, and learns the OffsetCommit version it takes.
func (r *Reader) dialCoordinator(ctx context.Context) (net.Conn, *bufio.Reader, error) {
	cc := &r.coord
	d := r.s.baseDialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	if d.SASLMechanism != nil || time.Now().Before(cc.retryAt) {
		return nil, nil, errCoordConn
	}
	c, br, version, err := r.openCoordinator(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		cc.retryAt = time.Now().Add(coordDialPause)
		r.s.logger.Debug("azkafka: commits go through the engine for a while: no connection of the Reader's own to the coordinator",
			"group", r.config.GroupID, "error", err, "for", coordDialPause)
		return nil, nil, fmt.Errorf("%w: %w", errCoordConn, err)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		c.Close()
		return nil, nil, errCoordConn
	}
	cc.c, cc.br, cc.version, cc.corr = c, br, version, 0
	return c, br, nil
}

// openCoordinator dials the group's coordinator with d and asks it for its
// API versions.
func (r *Reader) openCoordinator(ctx context.Context, d *kafka.Dialer) (net.Conn, *bufio.Reader, int16, error) {
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey, find.CoordinatorKeys = r.config.GroupID, []string{r.config.GroupID}
	found, err := find.RequestWith(ctx, r.engine())
	if err != nil {
		return nil, nil, 0, err
	}
	host, port, code := found.Host, found.Port, found.ErrorCode
	if len(found.Coordinators) > 0 {
		c := found.Coordinators[0]
		host, port, code = c.Host, c.Port, c.ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return nil, nil, 0, fmt.Errorf("finding the coordinator of group %s: %w", r.config.GroupID, err)
	}
	c, err := r.s.engineDial(d, r.hooks)(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		return nil, nil, 0, err
	}
	br := bufio.NewReader(c)
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(0)
	vresp := kmsg.NewPtrApiVersionsResponse()
	if err := roundTrip(ctx, c, br, r.s.clientID, 0, versions, vresp); err != nil {
		c.Close()
		return nil, nil, 0, err
	}
	if err := kerr.ErrorForCode(vresp.ErrorCode); err != nil {
		c.Close()
		return nil, nil, 0, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range vresp.ApiKeys {
		if k.ApiKey == int16(kmsg.OffsetCommit) {
			// Version 2 is the oldest a group member's commit (with
			// its generation) takes the shape the request has here.
			if v := min(k.MaxVersion, kmsg.NewPtrOffsetCommitRequest().MaxVersion()); v >= 2 {
				return c, br, v, nil
			}
		}
	}
	c.Close()
	return nil, nil, 0, errors.New("the coordinator takes no OffsetCommit version from 2 on")
}

// dropCoordinator closes c, if it is still the coordinator connection.
func (r *Reader) dropCoordinator(c net.Conn) {
	cc := &r.coord
	cc.mu.Lock()
	if cc.c == c {
		cc.c, cc.br = nil, nil
	}
	cc.mu.Unlock()
	c.Close()
}

// closeCoordinator closes the coordinator connection for good (Close).
func (r *Reader) closeCoordinator() {
	cc := &r.coord
	cc.mu.Lock()
	c := cc.c
	cc.c, cc.br, cc.closed = nil, nil, true
	cc.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// roundTrip writes req on c with correlation ID corr and reads its
// response into resp, within ctx and coordRequestTimeout.
func roundTrip(ctx context.Context, c net.Conn, br *bufio.Reader, clientID string, corr int32, req kmsg.Request, resp kmsg.Response) error {
	deadline := time.Now().Add(coordRequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	// An ended ctx ends the round trip at once.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b := make([]byte, 4, 128)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0) // no tagged fields in the header
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := c.Write(b); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return err
	}
	// The frame guard below checked the size against its limit, and
	// that the response decodes as req's; without it, a size beyond what
	// these small responses take is refused here.
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxCoordResponse {
		return fmt.Errorf("a response of %d bytes to %s: not an answer to it", n, kmsg.NameForKey(req.Key()))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return fmt.Errorf("a response with correlation ID %d to request %d", got, corr)
	}
	off := 4
	if kframe.ResponseHeaderFlexible(req.Key(), req.GetVersion()) {
		var err error
		if off, err = kframe.SkipTags(body, off); err != nil {
			return err
		}
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[off:])
}
