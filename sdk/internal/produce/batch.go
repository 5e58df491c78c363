package produce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// Header is the producer identity a record batch carries: the broker keeps,
// per producer ID and partition, the sequences of the last five batches it
// stored, and drops a batch it has already stored.
type Header struct {
	ProducerID    int64
	ProducerEpoch int16
	// BaseSequence is the sequence of the batch's first record; the
	// others follow it (wrapping at math.MaxInt32 to 0).
	BaseSequence int32
}

// NoProducer is the header of a batch sent without idempotence.
var NoProducer = Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// Layout of a v2 record batch as sent in a Produce request: a 4-byte size
// (the record set's length), then the batch. Offsets count from the start
// of the size.
const (
	offBatchLength    = 4 + 8  // after the base offset
	offMagic          = 4 + 16 // after the partition leader epoch
	offCRC            = 4 + 17
	offAttributes     = 4 + 21 // the CRC covers everything from here on
	offLastDelta      = 4 + 23
	offFirstTimestamp = 4 + 27
	offMaxTimestamp   = 4 + 35
	offProducerID     = 4 + 43
	offProducerEpoch  = 4 + 51
	offBaseSequence   = 4 + 53
	offRecordCount    = 4 + 57
	headerSize        = 4 + 61

	// attrCompression masks the codec bits of the attributes.
	attrCompression = 0x7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendBatch appends to dst a Produce request's record set holding msgs as
// one v2 record batch (size prefix included) with header h, the records
// compressed with codec (compress.None for none), and returns the extended
// slice. Records without a Time get now. Only the messages' Key, Value,
// Headers and Time are encoded.
func AppendBatch(dst []byte, h Header, msgs []kafka.Message, codec compress.Compression, now time.Time) ([]byte, error) {
	if len(msgs) == 0 {
		return dst, errors.New("produce: empty batch")
	}
	var cw compress.Codec
	if codec != compress.None {
		if cw = codec.Codec(); cw == nil {
			return dst, fmt.Errorf("produce: unsupported compression codec %d", codec)
		}
	}
	start := len(dst)
	dst = append(dst, make([]byte, headerSize)...)
	b := dst[start:]
	// base offset 0 (bytes 4..12 are zero), partition leader epoch -1.
	binary.BigEndian.PutUint32(b[4+12:], 0xFFFFFFFF)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(codec)&attrCompression)
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(len(msgs)-1))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(msgs)))

	nowMs := now.UnixMilli()
	first := millis(msgs[0].Time, nowMs)
	maxTS := first
	if cw == nil {
		for i := range msgs {
			ts := millis(msgs[i].Time, nowMs)
			maxTS = max(maxTS, ts)
			dst = appendRecord(dst, &msgs[i], int64(i), ts-first)
		}
	} else {
		scratch := scratchPool.Get().(*[]byte)
		records := (*scratch)[:0]
		for i := range msgs {
			ts := millis(msgs[i].Time, nowMs)
			maxTS = max(maxTS, ts)
			records = appendRecord(records, &msgs[i], int64(i), ts-first)
		}
		buf := sliceWriter{b: dst}
		zw := cw.NewWriter(&buf)
		_, err := zw.Write(records)
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
		if cap(records) <= maxPooled { // one huge batch must not pin its memory
			*scratch = records
			scratchPool.Put(scratch)
		}
		if err != nil {
			return dst[:start], fmt.Errorf("produce: compressing with %s: %w", codec, err)
		}
		dst = buf.b
	}
	b = dst[start:]
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(first))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-offBatchLength-4))
	if err := SetHeader(b, h); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// SetHeader writes h into the record set b made by AppendBatch and
// recomputes its CRC. A resend after an epoch bump uses it: the records
// stay the same bytes, only the producer identity changes.
func SetHeader(b []byte, h Header) error {
	if len(b) < headerSize || b[offMagic] != 2 {
		return errors.New("produce: not a v2 record batch")
	}
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return nil
}

// BatchHeader reads the producer identity and record count of the record
// set b made by AppendBatch.
func BatchHeader(b []byte) (Header, int32, error) {
	if len(b) < headerSize || b[offMagic] != 2 {
		return Header{}, 0, errors.New("produce: not a v2 record batch")
	}
	return Header{
		ProducerID:    int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch: int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:  int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
	}, int32(binary.BigEndian.Uint32(b[offRecordCount:])), nil
}

// RecordSize is the encoded size of m as a record of a batch, before
// compression, taking the largest varints for its offset and timestamp
// deltas. BatchBytes limits are applied to it.
func RecordSize(m *kafka.Message) int {
	n := 1 + 10 + 5 + // attributes, timestamp delta, offset delta
		bytesSize(m.Key) + bytesSize(m.Value) + varintSize(int64(len(m.Headers)))
	for i := range m.Headers {
		n += varintSize(int64(len(m.Headers[i].Key))) + len(m.Headers[i].Key) + bytesSize(m.Headers[i].Value)
	}
	return n + varintSize(int64(n))
}

// BatchOverhead is the size of a record set with no records.
const BatchOverhead = headerSize

func millis(t time.Time, now int64) int64 {
	if t.IsZero() {
		return now
	}
	return t.UnixMilli()
}

func appendRecord(dst []byte, m *kafka.Message, offsetDelta, tsDelta int64) []byte {
	size := 1 + varintSize(tsDelta) + varintSize(offsetDelta) +
		bytesSize(m.Key) + bytesSize(m.Value) + varintSize(int64(len(m.Headers)))
	for i := range m.Headers {
		size += varintSize(int64(len(m.Headers[i].Key))) + len(m.Headers[i].Key) + bytesSize(m.Headers[i].Value)
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, 0) // record attributes: unused
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, offsetDelta)
	dst = appendBytes(dst, m.Key)
	dst = appendBytes(dst, m.Value)
	dst = binary.AppendVarint(dst, int64(len(m.Headers)))
	for i := range m.Headers {
		dst = binary.AppendVarint(dst, int64(len(m.Headers[i].Key)))
		dst = append(dst, m.Headers[i].Key...)
		dst = appendBytes(dst, m.Headers[i].Value)
	}
	return dst
}

// appendBytes appends b with its varint length; nil is written as -1
// (null), as Kafka clients do for a missing key or header value.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return varintSize(int64(len(b))) + len(b)
}

func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63) // zigzag
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// sliceWriter appends to a byte slice.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var _ io.Writer = (*sliceWriter)(nil)

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}
