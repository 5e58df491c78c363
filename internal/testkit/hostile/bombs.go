package hostile

// The hostile bytes. The bombs are written field by field, in the order of
// the Kafka protocol's message definitions for the version the client asked
// for (the same order as kmsg's generated readFrom methods), with the
// compact KIP-482 encodings (uvarint lengths of N+1, tagged-field sections)
// when that version is flexible. Each stops right after the field that
// claims more than the frame holds; the size prefix always matches the
// bytes that follow, so only the claim is a lie.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// hugeClaim is the array count or byte length most bombs claim.
	hugeClaim = math.MaxInt32
	// metadataTopics is the topic count of MetadataBomb.
	metadataTopics = 1_000_000
	// randomBodyLen is the length of RandomBody's body after the
	// correlation ID.
	randomBodyLen = 1024
)

// negativeSize is NegativeSize's whole answer: a size prefix of -16.
var negativeSize = []byte{0xFF, 0xFF, 0xFF, 0xF0}

// tlsAlert is a TLS record: content type 21 (alert), version 3.3 (TLS 1.2),
// length 2, level 2 (fatal), description 50 (decode_error).
var tlsAlert = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32}

// httpBadRequest is what an nginx front end answers to bytes that are not
// HTTP. The body is exactly the 157 bytes announced; that length is the
// one of nginx's page with a version in its footer, so the footer names
// one although the Server header does not.
var httpBadRequest = []byte("HTTP/1.1 400 Bad Request\r\n" +
	"Server: nginx\r\n" +
	"Content-Type: text/html\r\n" +
	"Content-Length: 157\r\n" +
	"Connection: close\r\n" +
	"\r\n" +
	"<html>\r\n" +
	"<head><title>400 Bad Request</title></head>\r\n" +
	"<body>\r\n" +
	"<center><h1>400 Bad Request</h1></center>\r\n" +
	"<hr><center>nginx/1.24.0</center>\r\n" +
	"</body>\r\n" +
	"</html>\r\n")

// hugeSize returns HugeSize's bytes for the correct response frame resp:
// the size prefix 7F FF FF FF, then the first 8 bytes of the frame after
// its prefix (correlation ID and the start of the body).
func hugeSize(resp []byte) []byte {
	head := resp[4:min(len(resp), 12)]
	return append([]byte{0x7F, 0xFF, 0xFF, 0xFF}, head...)
}

// randomBody returns RandomBody's frame: size 4+1024, the correlation ID,
// then 1024 bytes from a PCG generator with a fixed seed.
func randomBody(corr int32) []byte {
	w := &wire{b: make([]byte, 4, 8+randomBodyLen)}
	w.int32(corr)
	rng := rand.New(rand.NewPCG(0x686f7374696c65, 1))
	for range randomBodyLen / 8 {
		w.b = binary.LittleEndian.AppendUint64(w.b, rng.Uint64())
	}
	return w.frame()
}

// bodyFlexible reports whether key at version uses the flexible (KIP-482)
// encoding, according to kmsg.
func bodyFlexible(key, version int16) bool {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return false
	}
	r.SetVersion(version)
	return r.IsFlexible()
}

// headerFlexible reports whether the response header of key at version has
// a tagged-field section after the correlation ID (response header v1).
// ApiVersions responses never do, so that a client can read them before it
// knows what the broker speaks.
func headerFlexible(key, version int16) bool {
	return key != keyAPIVersions && bodyFlexible(key, version)
}

// bombResponse returns the whole frame, size prefix included, that case c
// sends in answer to key at version with correlation ID corr; host and
// port are the broker MetadataBomb advertises. It returns nil when c is
// not a bomb or does not apply to key at version (HeaderTagsBomb needs a
// flexible response header; the other bombs answer their own key only).
func bombResponse(c Case, key, version int16, corr int32, host string, port int32) []byte {
	if c == HeaderTagsBomb {
		if !headerFlexible(key, version) {
			return nil
		}
		// Response header v1: correlation_id INT32, then _tagged_fields:
		// a count of 1 (uvarint 01), tag 0 (uvarint 00) and a size of
		// 2^63-1 (uvarint FF FF FF FF FF FF FF FF 7F); no byte follows.
		w := &wire{b: make([]byte, 4, 24)}
		w.int32(corr)
		w.uvarint(1)
		w.uvarint(0)
		w.uvarint(math.MaxInt64)
		return w.frame()
	}
	if own, ok := ownKey[c]; !ok || own != key {
		return nil
	}
	// Every frame starts with the response header: correlation_id INT32,
	// and an empty _tagged_fields (00) when the header is flexible.
	w := &wire{b: make([]byte, 4, 96), flex: bodyFlexible(key, version)}
	w.int32(corr)
	if headerFlexible(key, version) {
		w.uvarint(0)
	}
	switch c {
	case ApiVersionsBomb:
		// ApiVersions v0+: error_code INT16, api_keys ARRAY (claimed
		// 2147483647, none sent); throttle_time_ms (v1+) would follow.
		// v0-v2: 00 00 00 0A | corr | 00 00 | 7F FF FF FF (14 bytes).
		// v3+:   00 00 00 0B | corr | 00 00 | 80 80 80 80 08 (15 bytes).
		w.int16(0)
		w.count(hugeClaim)
	case MetadataBomb:
		// Metadata: throttle_time_ms INT32 (v3+);
		// brokers ARRAY of [node_id INT32, host STRING, port INT32,
		// rack NULLABLE_STRING (v1+), _tagged_fields (v9+)];
		// cluster_id NULLABLE_STRING (v2+); controller_id INT32 (v1+);
		// topics ARRAY, claimed 1,000,000, none sent.
		if version >= 3 {
			w.int32(0)
		}
		w.count(1)
		w.int32(nodeID)
		w.str(host)
		w.int32(port)
		if version >= 1 {
			w.str(rack)
		}
		w.tags()
		if version >= 2 {
			w.str(clusterID)
		}
		if version >= 1 {
			w.int32(nodeID)
		}
		w.count(metadataTopics)
	case InitProducerIDBomb:
		// InitProducerId: throttle_time_ms INT32, error_code INT16,
		// producer_id INT64, producer_epoch INT16, _tagged_fields (v2+).
		w.int32(0)
		w.int16(0)
		if !w.flex {
			// v0-v1 have no tags to lie with: the body stops after
			// the first 4 of producer_id's 8 bytes.
			w.int32(0)
			break
		}
		w.int64(producerID)
		w.int16(0)
		// _tagged_fields: count 1, tag 0, size 2147483647
		// (uvarint FF FF FF FF 07); no byte follows.
		w.uvarint(1)
		w.uvarint(0)
		w.uvarint(hugeClaim)
	case ProduceBomb:
		// Produce: responses (topics) ARRAY first in every version,
		// claimed 2147483647, none sent; throttle_time_ms (v1+) would
		// follow it.
		w.count(hugeClaim)
	case FetchBomb:
		// Fetch: throttle_time_ms INT32 (v1+), error_code INT16 (v7+),
		// session_id INT32 (v7+), responses (topics) ARRAY, claimed
		// 2147483647, none sent.
		if version >= 1 {
			w.int32(0)
		}
		if version >= 7 {
			w.int16(0)
			w.int32(0)
		}
		w.count(hugeClaim)
	case DescribeGroupsBomb:
		// DescribeGroups: throttle_time_ms INT32 (v1+); groups ARRAY of 1:
		// error_code INT16, error_message NULLABLE_STRING (v6+),
		// group_id STRING, group_state STRING, protocol_type STRING,
		// protocol_data STRING, members ARRAY of 1: member_id STRING,
		// group_instance_id NULLABLE_STRING (v4+), client_id STRING,
		// client_host STRING, member_metadata BYTES, claimed
		// 2147483647 bytes, none sent.
		if version >= 1 {
			w.int32(0)
		}
		w.count(1)
		w.int16(0)
		if version >= 6 {
			w.nullStr()
		}
		w.str("g")
		w.str("Stable")
		w.str("consumer")
		w.str("range")
		w.count(1)
		w.str("member-1")
		if version >= 4 {
			w.nullStr()
		}
		w.str("hostile")
		w.str("/" + host)
		w.count(hugeClaim)
	}
	return w.frame()
}

// wire appends Kafka primitive types after a 4-byte size placeholder; flex
// selects the compact forms of strings, arrays and bytes.
type wire struct {
	b    []byte
	flex bool
}

func (w *wire) int16(v int16)    { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *wire) int32(v int32)    { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *wire) int64(v int64)    { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *wire) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// count writes an array count or a byte-string length: INT32, or, when
// flexible, UNSIGNED_VARINT of n+1 (2147483647 is 80 80 80 80 08).
func (w *wire) count(n int32) {
	if w.flex {
		w.uvarint(uint64(n) + 1)
		return
	}
	w.int32(n)
}

// str writes a STRING (INT16 length) or COMPACT_STRING (uvarint length+1).
func (w *wire) str(s string) {
	if w.flex {
		w.uvarint(uint64(len(s)) + 1)
	} else {
		w.int16(int16(len(s)))
	}
	w.b = append(w.b, s...)
}

// nullStr writes a null NULLABLE_STRING: INT16 -1, or uvarint 0.
func (w *wire) nullStr() {
	if w.flex {
		w.uvarint(0)
		return
	}
	w.int16(-1)
}

// tags writes an empty _tagged_fields section when flexible.
func (w *wire) tags() {
	if w.flex {
		w.uvarint(0)
	}
}

// frame fills in the size prefix and returns the frame.
func (w *wire) frame() []byte {
	binary.BigEndian.PutUint32(w.b, uint32(len(w.b)-4))
	return w.b
}
