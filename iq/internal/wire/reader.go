// Package wire holds what the cluster source reads off the wire and kmsg
// does not decode: Kafka Streams' assignment and subscription user data
// (AssignmentInfo, SubscriptionInfo, versions 1 to StreamsProtocolLatest)
// and the consumer protocol's Subscription and Assignment that carry them,
// with decoders that bound every length and count by the bytes at hand
// and name the field and byte offset of what they refuse; and the
// source's own connection to a broker (Dial, Request), for the requests
// kafka-go's protocol layer does not know, encoded and decoded by kmsg.
//
// It is internal to package iq: its types and protocol versions may change
// with any release.
package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Quote returns s quoted and truncated to 64 bytes, for error messages
// about outside input.
func Quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// truncate returns s cut to n bytes, saying how many more there were.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..." + strconv.Itoa(len(s)-n) + " more bytes"
}

// wireReader reads the big-endian encodings Kafka and Kafka Streams use in
// group metadata. The first failure sticks: later reads return zero values,
// and err names the field that could not be read and its byte offset.
type wireReader struct {
	b   []byte
	off int
	err error
}

func (r *wireReader) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("field %s at byte %d: %s", field, r.off, fmt.Sprintf(format, args...))
	}
}

func (r *wireReader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(field, "needs %d bytes, %d left", n, len(r.b)-r.off)
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *wireReader) int8(field string) int8 {
	b := r.take(field, 1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *wireReader) int16(field string) int16 {
	b := r.take(field, 2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *wireReader) int32(field string) int32 {
	b := r.take(field, 4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *wireReader) int64(field string) int64 {
	b := r.take(field, 8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// count reads an int32 element count and checks that count elements of at
// least minSize bytes each can fit in what is left, so that a corrupt count
// cannot make the caller allocate without bound. A count of -1 (a null
// array) is returned as -1 when nullable.
func (r *wireReader) count(field string, minSize int, nullable bool) int {
	n := r.int32(field)
	if r.err != nil {
		return 0
	}
	if n == -1 && nullable {
		return -1
	}
	if n < 0 {
		r.off -= 4
		r.fail(field, "negative count %d", n)
		return 0
	}
	if int64(n)*int64(minSize) > int64(len(r.b)-r.off) {
		r.off -= 4
		r.fail(field, "count %d does not fit in the %d bytes left", n, len(r.b)-r.off-4)
		return 0
	}
	return int(n)
}

// string16 reads a Kafka STRING (int16 length, UTF-8); a length of -1 is
// null, returned as "" with null true when nullable.
func (r *wireReader) string16(field string, nullable bool) (s string, null bool) {
	n := r.int16(field)
	if r.err != nil {
		return "", false
	}
	if n == -1 && nullable {
		return "", true
	}
	if n < 0 {
		r.off -= 2
		r.fail(field, "negative string length %d", n)
		return "", false
	}
	if int(n) > len(r.b)-r.off {
		r.off -= 2
		r.fail(field, "length %d but %d bytes left", n, len(r.b)-r.off-2)
		return "", false
	}
	b := r.take(field, int(n))
	if !utf8.Valid(b) {
		r.off -= int(n) + 2
		r.fail(field, "not UTF-8: %q", truncate(string(b), 64))
		return "", false
	}
	return string(b), false
}

// bytes32 reads a Kafka BYTES (int32 length); -1 is null when nullable.
func (r *wireReader) bytes32(field string, nullable bool) (b []byte, null bool) {
	n := r.int32(field)
	if r.err != nil {
		return nil, false
	}
	if n == -1 && nullable {
		return nil, true
	}
	if n < 0 {
		r.off -= 4
		r.fail(field, "negative length %d", n)
		return nil, false
	}
	if int(n) > len(r.b)-r.off {
		r.off -= 4
		r.fail(field, "length %d but %d bytes left", n, len(r.b)-r.off-4)
		return nil, false
	}
	return r.take(field, int(n)), false
}

// javaUTF reads what java.io.DataOutputStream.writeUTF writes: an unsigned
// 16-bit length and that many bytes of modified UTF-8 (U+0000 as C0 80,
// characters beyond the BMP as two 3-byte surrogates).
func (r *wireReader) javaUTF(field string) string {
	b := r.take(field, 2)
	if b == nil {
		return ""
	}
	n := int(binary.BigEndian.Uint16(b))
	start := r.off
	if n > len(r.b)-r.off {
		r.off -= 2
		r.fail(field, "length %d but %d bytes left", n, len(r.b)-start)
		return ""
	}
	b = r.take(field, n)
	s, ok := decodeModifiedUTF8(b)
	if !ok {
		r.off = start - 2
		r.fail(field, "not modified UTF-8: %q", truncate(string(b), 64))
		return ""
	}
	return s
}

// javaChars reads n UTF-16 code units, as DataOutputStream.writeChars
// writes them.
func (r *wireReader) javaChars(field string, n int) string {
	b := r.take(field, 2*n)
	if b == nil {
		return ""
	}
	u := make([]uint16, n)
	for i := range u {
		u[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// decodeModifiedUTF8 decodes Java's modified UTF-8. Plain ASCII, the usual
// case for topic and host names, is returned without decoding.
func decodeModifiedUTF8(b []byte) (string, bool) {
	ascii := true
	for _, c := range b {
		if c == 0 || c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return string(b), true
	}
	units := make([]uint16, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c != 0 && c < 0x80:
			units = append(units, uint16(c))
			i++
		case c&0xe0 == 0xc0 && i+1 < len(b) && b[i+1]&0xc0 == 0x80:
			units = append(units, uint16(c&0x1f)<<6|uint16(b[i+1]&0x3f))
			i += 2
		case c&0xf0 == 0xe0 && i+2 < len(b) && b[i+1]&0xc0 == 0x80 && b[i+2]&0xc0 == 0x80:
			units = append(units, uint16(c&0x0f)<<12|uint16(b[i+1]&0x3f)<<6|uint16(b[i+2]&0x3f))
			i += 3
		default:
			return "", false
		}
	}
	return string(utf16.Decode(units)), true
}
