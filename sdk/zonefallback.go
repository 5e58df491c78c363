package sdk

// zonefallback.go keeps fetch from follower from stalling on a dead
// replica: once a broker of the own zone fails, fetches are sent without
// the rack ID for ZoneFallbackHold, so partitions go back to their
// leaders.

import (
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
	"github.com/azkafka/azkafka/metrics"
)

// ZoneFallbackHold is how long after the last failed dial or request to a
// broker of the client's own zone the Reader fetches without its rack ID
// (unless that broker answers again before), so that leaders serve the
// partitions themselves instead of naming that broker again. The cluster takes its dead brokers out of the leaders' choice
// within the brokers' session timeout (Kafka's broker.session.timeout.ms,
// 9 s by default), well inside it.
const ZoneFallbackHold = 30 * time.Second

// zoneFallback keeps fetch-from-follower from stalling on a dead replica.
// kgo keeps fetching from the replica a leader named until
// RecheckPreferredReplica, even while it cannot connect to it, and a
// leader keeps naming a dead replica until the cluster fences it. Java's
// consumer instead skips a preferred replica that is not online. So while
// a broker of the own zone refuses dials, the Reader's Fetch requests go
// out without the rack ID (rewritten on the connection, see rackConn):
// after the recheck the leaders serve the partitions themselves, and once
// the zone's brokers answer again (or ZoneFallbackHold after the last
// failure), fetches carry the rack again and move back in-zone. Safe for
// concurrent use.
//
// A broker that dies is noticed at once (its connections reset, dials are
// refused); one that hangs only when a request to it times out, after
// kafka.ReaderConfig.MaxWait plus the engine's 10 s request overhead.
type zoneFallback struct {
	az     string
	now    func() time.Time
	logger *slog.Logger
	rec    metrics.Recorder // nil without metrics

	mu   sync.Mutex
	down map[int32]time.Time // in-zone broker -> when its fallback ends
	on   bool                // the last answer of active, for logging
}

func newZoneFallback(az string, logger *slog.Logger) *zoneFallback {
	return &zoneFallback{az: az, now: time.Now, logger: logger, down: map[int32]time.Time{}}
}

// failed records a failed dial to a broker, or a connection to it that
// errored (a hung broker accepts connections but answers nothing: its
// requests time out).
func (z *zoneFallback) failed(meta kgo.BrokerMetadata) {
	if !z.inZone(meta) {
		return
	}
	z.mu.Lock()
	z.down[meta.NodeID] = z.now().Add(ZoneFallbackHold)
	z.mu.Unlock()
}

// served records a response read from a broker: it is alive.
func (z *zoneFallback) served(meta kgo.BrokerMetadata) {
	if !z.inZone(meta) {
		return
	}
	z.mu.Lock()
	delete(z.down, meta.NodeID)
	z.mu.Unlock()
}

func (z *zoneFallback) inZone(meta kgo.BrokerMetadata) bool {
	return meta.Rack != nil && *meta.Rack == z.az
}

// active reports whether fetches leave out the rack ID now.
func (z *zoneFallback) active() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	now := z.now()
	on := false
	for id, until := range z.down {
		if now.Before(until) {
			on = true
		} else {
			delete(z.down, id)
		}
	}
	if on != z.on {
		z.on = on
		if z.rec != nil {
			z.rec.ZoneFallback(on)
		}
		if on {
			z.logger.Info("azkafka: a broker of the client's zone does not answer; fetching from the partitions' leaders until it does",
				"az", z.az, "hold", ZoneFallbackHold)
		} else {
			z.logger.Info("azkafka: fetching from the client's zone again", "az", z.az)
		}
	}
	return on
}

// rackConn rewrites the Fetch requests written to it without their rack
// ID while the zone fallback is active. kgo writes each request with one
// Write; anything that is not one whole Fetch request passes unchanged.
type rackConn struct {
	net.Conn
	z *zoneFallback
}

func (c *rackConn) Write(b []byte) (int, error) {
	if isFetchFrame(b) && c.z.active() {
		if out, ok := stripFetchRack(b); ok {
			if _, err := c.Conn.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

// isFetchFrame reports whether b is one whole request frame of a Fetch
// version that carries a rack ID (v11+).
func isFetchFrame(b []byte) bool {
	return len(b) >= 12 &&
		int(binary.BigEndian.Uint32(b)) == len(b)-4 &&
		binary.BigEndian.Uint16(b[4:]) == uint16(kmsg.Fetch) &&
		int16(binary.BigEndian.Uint16(b[6:])) >= 11
}

// stripFetchRack returns the Fetch request frame b with an empty rack ID,
// or false when b does not parse or has no rack ID.
func stripFetchRack(b []byte) ([]byte, bool) {
	version := int16(binary.BigEndian.Uint16(b[6:]))
	off := 12 // size, key, version, correlation ID
	if len(b) < off+2 {
		return nil, false
	}
	if n := int16(binary.BigEndian.Uint16(b[off:])); n > 0 {
		off += int(n)
	}
	off += 2
	if version >= 12 && off <= len(b) { // flexible: the header's tagged fields
		n, err := kframe.SkipTags(b[off:], 0)
		if err != nil {
			return nil, false
		}
		off += n
	}
	if off > len(b) {
		return nil, false
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	if err := req.ReadFrom(b[off:]); err != nil || req.Rack == "" {
		return nil, false
	}
	req.Rack = ""
	out := append(make([]byte, 0, len(b)), b[:off]...)
	out = req.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, true
}
