package kproxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RoundTrip sends req to the Kafka-protocol server at addr on a fresh
// connection, as clientID, and decodes the response. It is for tests that
// look at the wire (which versions a broker supports, what an agent
// answers) without a client library's own version negotiation. ctx bounds
// the whole exchange; the connection is closed before RoundTrip returns.
func RoundTrip(ctx context.Context, addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	const correlationID = 1
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	if _, err := conn.Write(f.AppendRequest(nil, req, correlationID)); err != nil {
		return nil, fmt.Errorf("key %d v%d: writing request: %w", req.Key(), req.GetVersion(), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, fmt.Errorf("key %d v%d: reading response size: %w", req.Key(), req.GetVersion(), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("%w: key %d v%d: response of %d bytes", ErrMalformed, req.Key(), req.GetVersion(), n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, fmt.Errorf("key %d v%d: reading response: %w", req.Key(), req.GetVersion(), err)
	}
	return DecodeResponse(Request{Key: req.Key(), Version: req.GetVersion(), CorrelationID: correlationID}, buf)
}
