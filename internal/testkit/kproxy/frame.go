package kproxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
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
	keyFindCoordinator int16 = 10
)

// ErrMalformed is wrapped by every error about bytes that are not a valid
// Kafka frame or header.
var ErrMalformed = kframe.ErrMalformed

// RequestHeader is the decoded header of one request frame.
type RequestHeader = kframe.RequestHeader

// ParseRequestHeader decodes the request header at the start of frame,
// which holds the bytes after the 4-byte size prefix; see
// kframe.ParseRequestHeader.
func ParseRequestHeader(frame []byte) (RequestHeader, error) { return kframe.ParseRequestHeader(frame) }

func produceAcks(version int16, body []byte) (int16, error) { return kframe.ProduceAcks(version, body) }

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
	if kframe.ResponseHeaderFlexible(req.Key, req.Version) {
		end, err := kframe.SkipTags(resp, off)
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
	if kframe.ResponseHeaderFlexible(req.Key, req.Version) {
		b = append(b, 0) // no header tags
	}
	r.SetVersion(req.Version)
	return r.AppendTo(b)
}

// FailProduce is an OnResponse hook that answers the given partitions of
// every Produce response with the error code (the broker still stored
// their records): a broker refusing a partition, as seen by the client.
// A response it cannot decode goes through unchanged and is passed to
// onErr, when not nil.
func FailProduce(code int16, partitions []int32, onErr func(error)) func(Request, []byte) []byte {
	return rewriteResponses(kmsg.Produce, onErr, func(r kmsg.Response) {
		pr := r.(*kmsg.ProduceResponse)
		for i := range pr.Topics {
			for j := range pr.Topics[i].Partitions {
				if slices.Contains(partitions, pr.Topics[i].Partitions[j].Partition) {
					pr.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	})
}

// FailCommits is an OnResponse hook that answers every partition of
// every OffsetCommit response with the error code (the broker still
// stored the offsets): a coordinator refusing a commit, as seen by the
// client. A response it cannot decode goes through unchanged and is
// passed to onErr, when not nil.
func FailCommits(code int16, onErr func(error)) func(Request, []byte) []byte {
	return rewriteResponses(kmsg.OffsetCommit, onErr, func(r kmsg.Response) {
		cr := r.(*kmsg.OffsetCommitResponse)
		for i := range cr.Topics {
			for j := range cr.Topics[i].Partitions {
				cr.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	})
}

// FailJoins is an OnResponse hook that answers every JoinGroup response
// with the error code: a coordinator refusing members, as seen by the
// client. A response it cannot decode goes through unchanged and is
// passed to onErr, when not nil.
func FailJoins(code int16, onErr func(error)) func(Request, []byte) []byte {
	return rewriteResponses(kmsg.JoinGroup, onErr, func(r kmsg.Response) {
		jr := r.(*kmsg.JoinGroupResponse)
		jr.ErrorCode = code
	})
}

// FirstOf applies hook to the first n responses to requests of key; the
// later ones, and the responses to other requests, go through unchanged.
func FirstOf(key kmsg.Key, n int, hook func(Request, []byte) []byte) func(Request, []byte) []byte {
	var left atomic.Int64
	left.Store(int64(n))
	return func(req Request, resp []byte) []byte {
		if req.Key != int16(key) || left.Add(-1) < 0 {
			return resp
		}
		return hook(req, resp)
	}
}

// FailFetches is an OnResponse hook that answers every partition of the
// next n Fetch responses naming a partition with the error code and no
// records: a broker refusing a fetch (OFFSET_OUT_OF_RANGE for an offset
// its log has, say), as seen by the client. Later responses, and one it
// cannot decode (passed to onErr, when not nil), go through unchanged.
func FailFetches(code int16, n int, onErr func(error)) func(Request, []byte) []byte {
	var left atomic.Int64
	left.Store(int64(n))
	return rewriteResponses(kmsg.Fetch, onErr, func(r kmsg.Response) {
		fr := r.(*kmsg.FetchResponse)
		if left.Load() <= 0 {
			return
		}
		hit := false
		for i := range fr.Topics {
			for j := range fr.Topics[i].Partitions {
				p := &fr.Topics[i].Partitions[j]
				p.ErrorCode, p.RecordBatches, hit = code, nil, true
			}
		}
		if hit {
			left.Add(-1)
		}
	})
}

// rewriteResponses is an OnResponse hook that decodes every response to
// a request of key, lets edit change it and encodes it again; other
// responses, and one it cannot decode (passed to onErr, when not nil), go
// through unchanged.
func rewriteResponses(key kmsg.Key, onErr func(error), edit func(kmsg.Response)) func(Request, []byte) []byte {
	return func(req Request, resp []byte) []byte {
		if req.Key != int16(key) {
			return resp
		}
		r, err := DecodeResponse(req, resp)
		if err != nil {
			if onErr != nil {
				onErr(err)
			}
			return resp
		}
		edit(r)
		return EncodeResponse(req, r)
	}
}

// corruptRecords returns the Produce request frame (size prefix first)
// with the last byte of each partition's records flipped, which their
// batch's CRC covers.
func corruptRecords(frame []byte, h RequestHeader) ([]byte, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = h.Version
	if err := req.ReadFrom(frame[4+h.BodyOffset:]); err != nil {
		return nil, fmt.Errorf("%w: produce request: %v", ErrMalformed, err)
	}
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if recs := req.Topics[i].Partitions[j].Records; len(recs) > 0 {
				recs[len(recs)-1] ^= 1
			}
		}
	}
	out := append(slices.Clone(frame[:4+h.BodyOffset]), req.AppendTo(nil)...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}
