package kproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxFrameSize is the largest request or response frame the proxy accepts,
// in bytes (the 4-byte size prefix excluded). Kafka's own default for
// socket.request.max.bytes is 100 MiB; a larger size is treated as garbage
// and the connection is closed.
const MaxFrameSize = 100 << 20

// Kafka API keys the proxy gives special treatment.
const (
	keyProduce         int16 = 0
	keyMetadata        int16 = 3
	keyControlledShut  int16 = 7
	keyFindCoordinator int16 = 10
	keyAPIVersions     int16 = 18
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

// isFlexible reports whether key at version uses flexible headers. Unknown
// keys are treated as non-flexible: their client ID is still readable,
// since it precedes the tagged fields.
func isFlexible(key, version int16) bool {
	v, ok := firstFlexible[key]
	return ok && v >= 0 && version >= v
}

// responseHeaderFlexible reports whether the response to key at version
// carries a tagged-field section after the correlation ID. ApiVersions
// responses never do, so that clients can parse them before they know
// which versions the broker speaks.
func responseHeaderFlexible(key, version int16) bool {
	return key != keyAPIVersions && isFlexible(key, version)
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
func ParseRequestHeader(frame []byte) (RequestHeader, error) {
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
		h.ClientID = string(frame[off : off+n])
		off += n
	}
	if isFlexible(h.Key, h.Version) {
		end, err := skipTags(frame, off)
		if err != nil {
			return h, fmt.Errorf("key %d v%d header: %w", h.Key, h.Version, err)
		}
		off = end
	}
	h.BodyOffset = off
	return h, nil
}

// skipTags skips a KIP-482 tagged-field section starting at off.
func skipTags(b []byte, off int) (int, error) {
	num, off, err := uvarint(b, off)
	if err != nil {
		return 0, err
	}
	for i := uint64(0); i < num; i++ {
		if _, off, err = uvarint(b, off); err != nil { // tag
			return 0, err
		}
		var size uint64
		if size, off, err = uvarint(b, off); err != nil {
			return 0, err
		}
		if size > uint64(len(b)-off) {
			return 0, fmt.Errorf("%w: tagged field of %d bytes exceeds frame", ErrMalformed, size)
		}
		off += int(size)
	}
	return off, nil
}

func uvarint(b []byte, off int) (uint64, int, error) {
	if off > len(b) {
		return 0, 0, fmt.Errorf("%w: truncated varint", ErrMalformed)
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, 0, fmt.Errorf("%w: truncated or overlong varint", ErrMalformed)
	}
	return v, off + n, nil
}

// produceAcks returns the acks field of a Produce request body, or an error
// when the body is too short to hold it.
func produceAcks(version int16, body []byte) (int16, error) {
	off := 0
	if version >= 3 { // transactional_id precedes acks
		if isFlexible(keyProduce, version) {
			n, end, err := uvarint(body, 0)
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

// readFrame reads one size-prefixed frame and returns it with its prefix.
func readFrame(r io.Reader, sizeBuf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, sizeBuf[:4]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf))
	if size < 0 || size > MaxFrameSize {
		return nil, fmt.Errorf("%w: frame size %d out of range [0, %d]", ErrMalformed, size, MaxFrameSize)
	}
	buf := make([]byte, 4+int(size))
	copy(buf, sizeBuf[:4])
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// DecodeResponse decodes resp, a response frame without its size prefix
// (correlation ID, header tags, body) as handed to an OnResponse hook, into
// the kmsg type for req's key and version.
func DecodeResponse(req Request, resp []byte) (kmsg.Response, error) {
	r := kmsg.ResponseForKey(req.Key)
	if r == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", ErrMalformed, req.Key)
	}
	r.SetVersion(req.Version)
	if len(resp) < 4 {
		return nil, fmt.Errorf("%w: response to key %d shorter than a correlation id", ErrMalformed, req.Key)
	}
	off := 4
	if responseHeaderFlexible(req.Key, req.Version) {
		end, err := skipTags(resp, off)
		if err != nil {
			return nil, fmt.Errorf("response to key %d v%d header: %w", req.Key, req.Version, err)
		}
		off = end
	}
	if err := r.ReadFrom(resp[off:]); err != nil {
		return nil, fmt.Errorf("%w: response to key %d v%d: %v", ErrMalformed, req.Key, req.Version, err)
	}
	return r, nil
}

// EncodeResponse encodes r as the response to req, in the form an
// OnResponse hook returns: correlation ID, header tags when flexible, body.
func EncodeResponse(req Request, r kmsg.Response) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 256), uint32(req.CorrelationID))
	if responseHeaderFlexible(req.Key, req.Version) {
		b = append(b, 0) // no header tags
	}
	r.SetVersion(req.Version)
	return r.AppendTo(b)
}
