package sdk

// reader_coord.go holds the Reader's own connection to its group's
// coordinator, which synchronous commits are written and read on, on the
// caller's goroutine (see coordConn).

import (
	"context"
	"errors"
	"fmt"
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
// after a pause when the dial failed. With a SASLMechanism it
// authenticates as kafka-go does, and dials anew before the session the
// broker gave ends.
type coordConn struct {
	mu sync.Mutex // guards c against Close; commitTurn orders its use
	c  net.Conn
	// version is the OffsetCommit version: the highest the coordinator
	// and this client both know.
	version int16
	corr    int32
	// retryAt is when a dial may be tried again after one failed.
	retryAt time.Time
	// expiry is when to dial anew, before the broker ends the SASL
	// session (KIP-368); zero without one.
	expiry time.Time
	closed bool
	sent   int64 // commits answered on it
}

// coordDialPause is how long commits go through the engine after the
// dial of a coordinator connection failed.
const coordDialPause = 5 * time.Second

// coordRequestTimeout bounds a commit's round trip on the connection when
// its ctx has no sooner deadline; past it, the commit goes through the
// engine.
const coordRequestTimeout = 30 * time.Second

// errCoordConn marks a failure of the coordinator connection: the commit
// goes through the engine.
var errCoordConn = errors.New("sdk: the coordinator connection failed")

// coordCommit sends req on the coordinator connection, dialing it first
// when there is none. Its error wraps errCoordConn when the commit should
// go through the engine instead; ctx's error when ctx ended.
func (r *Reader) coordCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	cc := &r.coord
	cc.mu.Lock()
	c, closed := cc.c, cc.closed
	cc.mu.Unlock()
	if closed {
		return nil, errCoordConn
	}
	if c != nil && !cc.expiry.IsZero() && time.Now().After(cc.expiry) {
		r.dropCoordinator(c)
		c = nil
	}
	if c == nil {
		var err error
		if c, err = r.dialCoordinator(ctx); err != nil {
			return nil, err
		}
	}
	req.SetVersion(cc.version)
	cc.corr++
	answer, err := roundTrip(ctx, c, r.s.clientID, cc.corr, req)
	if err != nil {
		r.dropCoordinator(c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Waited out: the engine commits instead.
		r.absorb(metrics.OpCommit, fmt.Errorf("the connection to the coordinator: %w", err))
		return nil, fmt.Errorf("%w: %w", errCoordConn, err)
	}
	resp := answer.(*kmsg.OffsetCommitResponse)
	cc.sent++
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			switch kerr.ErrorForCode(p.ErrorCode) {
			case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
				// Moved, or not ready: the engine finds it again (and
				// retries within; the refusal is what a call that ends
				// meanwhile names).
				err := kerr.ErrorForCode(p.ErrorCode)
				r.absorb(metrics.OpCommit, fmt.Errorf("the coordinator of group %s at %s: %w", r.config.GroupID, c.RemoteAddr(), err))
				r.dropCoordinator(c)
				return nil, fmt.Errorf("%w: %w", errCoordConn, err)
			}
		}
	}
	return resp, nil
}

// dialCoordinator finds the group's coordinator through the engine, dials
// it, and learns the OffsetCommit version it takes.
func (r *Reader) dialCoordinator(ctx context.Context) (net.Conn, error) {
	cc := &r.coord
	d := r.s.baseDialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	if time.Now().Before(cc.retryAt) {
		return nil, errCoordConn
	}
	c, version, lifetime, err := r.openCoordinator(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cc.retryAt = time.Now().Add(coordDialPause)
		r.s.logger.Debug("azkafka: commits go through the engine for a while: no connection of the Reader's own to the coordinator",
			"group", r.config.GroupID, "error", err, "for", coordDialPause)
		return nil, fmt.Errorf("%w: %w", errCoordConn, err)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		c.Close()
		return nil, errCoordConn
	}
	cc.c, cc.version, cc.corr = c, version, 0
	cc.expiry = time.Time{}
	if lifetime > 0 {
		// Dialed anew before the broker ends the SASL session.
		cc.expiry = time.Now().Add(lifetime * 9 / 10)
	}
	return c, nil
}

// openCoordinator dials the group's coordinator with d and asks it for its
// API versions.
func (r *Reader) openCoordinator(ctx context.Context, d *kafka.Dialer) (c net.Conn, version int16, lifetime time.Duration, err error) {
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey, find.CoordinatorKeys = r.config.GroupID, []string{r.config.GroupID}
	found, err := find.RequestWith(ctx, r.engine())
	if err != nil {
		return nil, 0, 0, err
	}
	host, port, code := found.Host, found.Port, found.ErrorCode
	if len(found.Coordinators) > 0 {
		c := found.Coordinators[0]
		host, port, code = c.Host, c.Port, c.ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return nil, 0, 0, fmt.Errorf("finding the coordinator of group %s: %w", r.config.GroupID, err)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if c, err = r.s.engineDial(d, r.hooks)(ctx, "tcp", addr); err != nil {
		return nil, 0, 0, err
	}
	if d.SASLMechanism != nil {
		sctx, cancel := context.WithTimeout(ctx, coordRequestTimeout)
		lifetime, err = kframe.SASLAuthenticate(sctx, c, d.SASLMechanism, r.s.clientID, addr)
		cancel()
		if err != nil {
			c.Close()
			return nil, 0, 0, err
		}
	}
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(0)
	answer, err := roundTrip(ctx, c, r.s.clientID, 0, versions)
	if err != nil {
		c.Close()
		return nil, 0, 0, err
	}
	vresp := answer.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(vresp.ErrorCode); err != nil {
		c.Close()
		return nil, 0, 0, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range vresp.ApiKeys {
		if k.ApiKey == int16(kmsg.OffsetCommit) {
			// Version 2 is the oldest a group member's commit (with
			// its generation) takes the shape the request has here.
			if v := min(k.MaxVersion, kmsg.NewPtrOffsetCommitRequest().MaxVersion()); v >= 2 {
				return c, v, lifetime, nil
			}
		}
	}
	c.Close()
	return nil, 0, 0, errors.New("the coordinator takes no OffsetCommit version from 2 on")
}

// dropCoordinator closes c, if it is still the coordinator connection.
func (r *Reader) dropCoordinator(c net.Conn) {
	cc := &r.coord
	cc.mu.Lock()
	if cc.c == c {
		cc.c = nil
	}
	cc.mu.Unlock()
	c.Close()
}

// closeCoordinator closes the coordinator connection for good (Close).
func (r *Reader) closeCoordinator() {
	cc := &r.coord
	cc.mu.Lock()
	c := cc.c
	cc.c, cc.closed = nil, true
	cc.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// roundTrip writes req on c with correlation ID corr and reads its
// response, within ctx and coordRequestTimeout.
func roundTrip(ctx context.Context, c net.Conn, clientID string, corr int32, req kmsg.Request) (kmsg.Response, error) {
	deadline := time.Now().Add(coordRequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// An ended ctx ends the round trip at once.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return kframe.Request(c, clientID, corr, req)
}
