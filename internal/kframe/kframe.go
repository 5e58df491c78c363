// Package kframe parses the parts of Kafka frames that the SDK's
// connection wrappers and test tools look at before a client decodes them:
// request headers, the acks of a Produce request, KIP-482 tagged fields.
// Every length is checked against the bytes at hand. Request makes one
// request's round trip on a connection of the caller's own (the IQ
// cluster source's, the Reader's to its coordinator), kmsg encoding and
// decoding.
package kframe

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka API keys the parsers give special treatment.
const (
	keyProduce        int16 = 0
	keyControlledShut int16 = 7
	keyAPIVersions    int16 = 18
)

// ErrMalformed is wrapped by every error about bytes that are not a valid
// Kafka frame or header.
var ErrMalformed = errors.New("malformed kafka frame")

// firstFlexible[key] is the first version of a request key that uses the
// flexible (KIP-482) header, or -1 when no known version does. Built once
// from kmsg so that it follows the protocol definitions exactly.
var firstFlexible = func() map[int16]int16 {
	m := make(map[int16]int16)
	for k := int16(0); k < 200; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		m[k] = -1
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				m[k] = v
				break
			}
		}
	}
	return m
}()

// IsFlexible reports whether key at version uses flexible headers. Unknown
// keys are treated as non-flexible: their client ID is still readable,
// since it precedes the tagged fields.
func IsFlexible(key, version int16) bool {
	v, ok := firstFlexible[key]
	return ok && v >= 0 && version >= v
}

// ResponseHeaderFlexible reports whether the response to key at version
// carries a tagged-field section after the correlation ID. ApiVersions
// responses never do, so that clients can parse them before they know
// which versions the broker speaks.
func ResponseHeaderFlexible(key, version int16) bool {
	return key != keyAPIVersions && IsFlexible(key, version)
}

// RequestHeader is the decoded header of one request frame.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is the client ID, "" when absent or null.
	ClientID string
	// BodyOffset is where the request body starts within the frame.
	BodyOffset int
}

// ParseRequestHeader decodes the request header at the start of frame,
// which holds the bytes after the 4-byte size prefix. It handles header
// v0 (ControlledShutdown v0: no client ID), v1 and v2 (flexible: tagged
// fields after the client ID). Errors wrap ErrMalformed.
func ParseRequestHeader(frame []byte) (RequestHeader, error) { return parseRequestHeader(frame, true) }

// ParseRequestHeaderNoID is ParseRequestHeader without the client ID
// (left ""), which it does not allocate.
func ParseRequestHeaderNoID(frame []byte) (RequestHeader, error) {
	return parseRequestHeader(frame, false)
}

func parseRequestHeader(frame []byte, withID bool) (RequestHeader, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, fmt.Errorf("%w: request header needs 8 bytes, frame has %d", ErrMalformed, len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	off := 8
	if h.Key == keyControlledShut && h.Version == 0 {
		h.BodyOffset = off
		return h, nil
	}
	if len(frame) < off+2 {
		return h, fmt.Errorf("%w: key %d v%d: client ID length missing", ErrMalformed, h.Key, h.Version)
	}
	n := int(int16(binary.BigEndian.Uint16(frame[off:])))
	off += 2
	switch {
	case n == -1: // null client ID
	case n < 0 || off+n > len(frame):
		return h, fmt.Errorf("%w: key %d v%d: client ID length %d exceeds frame of %d bytes", ErrMalformed, h.Key, h.Version, n, len(frame))
	default:
		if withID {
			h.ClientID = string(frame[off : off+n])
		}
		off += n
	}
	if IsFlexible(h.Key, h.Version) {
		end, err := SkipTags(frame, off)
		if err != nil {
			return h, fmt.Errorf("key %d v%d header: %w", h.Key, h.Version, err)
		}
		off = end
	}
	h.BodyOffset = off
	return h, nil
}

// SkipTags skips a KIP-482 tagged-field section starting at off.
func SkipTags(b []byte, off int) (int, error) {
	num, off, err := Uvarint(b, off)
	if err != nil {
		return 0, err
	}
	for i := uint64(0); i < num; i++ {
		if _, off, err = Uvarint(b, off); err != nil { // tag
			return 0, err
		}
		var size uint64
		if size, off, err = Uvarint(b, off); err != nil {
			return 0, err
		}
		if size > uint64(len(b)-off) {
			return 0, fmt.Errorf("%w: tagged field of %d bytes exceeds frame", ErrMalformed, size)
		}
		off += int(size)
	}
	return off, nil
}

// Uvarint reads an unsigned varint at off and returns it with the offset
// after it.
func Uvarint(b []byte, off int) (uint64, int, error) {
	if off > len(b) {
		return 0, 0, fmt.Errorf("%w: truncated varint", ErrMalformed)
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, 0, fmt.Errorf("%w: truncated or overlong varint", ErrMalformed)
	}
	return v, off + n, nil
}

// ProduceAcks returns the acks field of a Produce request body, or an error
// when the body is too short to hold it.
func ProduceAcks(version int16, body []byte) (int16, error) {
	off := 0
	if version >= 3 { // transactional_id precedes acks
		if IsFlexible(keyProduce, version) {
			n, end, err := Uvarint(body, 0)
			if err != nil {
				return 0, fmt.Errorf("produce v%d transactional id: %w", version, err)
			}
			off = end
			if n > 0 {
				if n-1 > uint64(len(body)-off) {
					return 0, fmt.Errorf("%w: produce v%d transactional id longer than frame", ErrMalformed, version)
				}
				off += int(n - 1)
			}
		} else {
			if len(body) < 2 {
				return 0, fmt.Errorf("%w: produce v%d too short", ErrMalformed, version)
			}
			n := int(int16(binary.BigEndian.Uint16(body)))
			off = 2
			if n > 0 {
				off += n
			}
		}
	}
	if off+2 > len(body) {
		return 0, fmt.Errorf("%w: produce v%d: acks missing", ErrMalformed, version)
	}
	return int16(binary.BigEndian.Uint16(body[off:])), nil
}
