package kframe

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxResponseBytes bounds a response Request reads: 64 MiB.
const MaxResponseBytes = 64 << 20

// Request writes req, framed by kmsg with clientID and correlation ID corr,
// reads one response and decodes it with kmsg. An I/O error is returned as
// it is; a response of the wrong size or correlation ID, or that does not
// decode, is an error that says so.
func Request(conn net.Conn, clientID string, corr int32, req kmsg.Request) (kmsg.Response, error) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, corr)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > MaxResponseBytes {
		return nil, fmt.Errorf("response size %d out of range 4..%d", n, MaxResponseBytes)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(conn, b); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, fmt.Errorf("response correlation ID %d, want %d", got, corr)
	}
	off := 4
	if ResponseHeaderFlexible(req.Key(), req.GetVersion()) {
		var err error
		if off, err = SkipTags(b, off); err != nil {
			return nil, fmt.Errorf("response header: %w", err)
		}
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(b[off:]); err != nil {
		return nil, fmt.Errorf("decoding the %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
