package produce

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// decoded is a record set as kafka-go's own decoder reads it.
type decoded struct {
	h       Header
	attrs   protocol.Attributes
	records []kafka.Message
}

// decodeWithKafkaGo reads b with kafka-go's record set decoder, which
// checks the CRC-32C.
func decodeWithKafkaGo(t testing.TB, b []byte) decoded {
	t.Helper()
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(b)); err != nil {
		t.Fatalf("kafka-go decoder: %v", err)
	}
	stream, ok := rs.Records.(*protocol.RecordStream)
	if !ok || len(stream.Records) != 1 {
		t.Fatalf("kafka-go decoded %T, want one batch", rs.Records)
	}
	batch, ok := stream.Records[0].(*protocol.RecordBatch)
	if !ok {
		t.Fatalf("kafka-go decoded a %T, want a *protocol.RecordBatch", stream.Records[0])
	}
	d := decoded{
		h:     Header{ProducerID: batch.ProducerID, ProducerEpoch: batch.ProducerEpoch, BaseSequence: batch.BaseSequence},
		attrs: rs.Attributes,
	}
	for {
		r, err := batch.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kafka-go reading record %d: %v", len(d.records), err)
		}
		m := kafka.Message{Offset: r.Offset, Time: r.Time}
		if m.Key, err = protocol.ReadAll(r.Key); err != nil {
			t.Fatal(err)
		}
		if m.Value, err = protocol.ReadAll(r.Value); err != nil {
			t.Fatal(err)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header(h))
		}
		d.records = append(d.records, m)
	}
	return d
}

// checkRoundTrip encodes msgs with h and codec and checks what kafka-go's
// decoder and franz-go's kmsg read back.
func checkRoundTrip(t testing.TB, h Header, msgs []kafka.Message, codec compress.Compression) []byte {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000)
	prefix := []byte("prefix")
	b, err := AppendBatch(append([]byte(nil), prefix...), h, msgs, codec, now)
	if err != nil {
		t.Fatalf("AppendBatch: %v", err)
	}
	if !bytes.Equal(b[:len(prefix)], prefix) {
		t.Fatalf("AppendBatch changed the bytes before the batch")
	}
	b = b[len(prefix):]
	if got := int(binary.BigEndian.Uint32(b)); got != len(b)-4 {
		t.Fatalf("size prefix %d, want %d", got, len(b)-4)
	}

	d := decodeWithKafkaGo(t, b)
	if d.h != h {
		t.Fatalf("kafka-go decoded header %+v, want %+v", d.h, h)
	}
	if got := compress.Compression(d.attrs.Compression()); got != codec {
		t.Fatalf("kafka-go decoded compression %v, want %v", got, codec)
	}
	if len(d.records) != len(msgs) {
		t.Fatalf("kafka-go decoded %d records, want %d", len(d.records), len(msgs))
	}
	for i, m := range msgs {
		r := d.records[i]
		want := m.Time
		if want.IsZero() {
			want = now
		}
		if !bytes.Equal(r.Key, m.Key) || (r.Key == nil) != (m.Key == nil) ||
			!bytes.Equal(r.Value, m.Value) || (r.Value == nil) != (m.Value == nil) {
			t.Fatalf("record %d: key %q value %q, want key %q value %q", i, r.Key, r.Value, m.Key, m.Value)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d", i, r.Offset)
		}
		if r.Time.UnixMilli() != want.UnixMilli() {
			t.Fatalf("record %d: time %v, want %v", i, r.Time.UnixMilli(), want.UnixMilli())
		}
		if len(r.Headers) != len(m.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(m.Headers))
		}
		for j := range m.Headers {
			if r.Headers[j].Key != m.Headers[j].Key || !bytes.Equal(r.Headers[j].Value, m.Headers[j].Value) {
				t.Fatalf("record %d header %d: %+v, want %+v", i, j, r.Headers[j], m.Headers[j])
			}
		}
	}

	// The fields kafka-go's decoder skips, read by a second decoder.
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b[4:]); err != nil {
		t.Fatalf("kmsg: %v", err)
	}
	if int(kb.Length) != len(b)-4-12 || kb.LastOffsetDelta != int32(len(msgs)-1) || kb.NumRecords != int32(len(msgs)) ||
		kb.PartitionLeaderEpoch != -1 || kb.FirstOffset != 0 {
		t.Fatalf("kmsg read length %d lastOffsetDelta %d records %d leader epoch %d first offset %d",
			kb.Length, kb.LastOffsetDelta, kb.NumRecords, kb.PartitionLeaderEpoch, kb.FirstOffset)
	}
	if uint32(kb.CRC) != crc32.Checksum(b[offAttributes:], castagnoli) {
		t.Fatalf("CRC %x does not cover the batch", uint32(kb.CRC))
	}
	first, maxTS := now.UnixMilli(), int64(0)
	if !msgs[0].Time.IsZero() {
		first = msgs[0].Time.UnixMilli()
	}
	for _, m := range msgs {
		ts := now.UnixMilli()
		if !m.Time.IsZero() {
			ts = m.Time.UnixMilli()
		}
		maxTS = max(maxTS, ts)
	}
	if kb.FirstTimestamp != first || kb.MaxTimestamp != max(maxTS, first) {
		t.Fatalf("kmsg timestamps first %d max %d, want %d %d", kb.FirstTimestamp, kb.MaxTimestamp, first, maxTS)
	}
	return b
}

var codecs = []compress.Compression{compress.None, compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd}

func TestAppendBatchRoundTrip(t *testing.T) {
	t0 := time.UnixMilli(1_600_000_000_000)
	msgs := []kafka.Message{
		{Key: []byte("k0"), Value: []byte("v0"), Time: t0},
		{Key: nil, Value: []byte("no key"), Time: t0.Add(-time.Second)}, // negative delta
		{Key: []byte{}, Value: nil},                                     // empty key, null value, no time
		{Value: bytes.Repeat([]byte("x"), 300), Headers: []kafka.Header{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}}},
	}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			checkRoundTrip(t, Header{ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7}, msgs, codec)
			checkRoundTrip(t, NoProducer, msgs[:1], codec)
		})
	}
}

func TestSetHeaderKeepsRecords(t *testing.T) {
	msgs := []kafka.Message{{Value: []byte("a")}, {Value: []byte("b")}}
	b := checkRoundTrip(t, Header{ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0}, msgs, compress.Snappy)
	before := append([]byte(nil), b[headerSize:]...)
	h := Header{ProducerID: 1, ProducerEpoch: 1, BaseSequence: 2147483647}
	if err := SetHeader(b, h); err != nil {
		t.Fatal(err)
	}
	if d := decodeWithKafkaGo(t, b); d.h != h || len(d.records) != 2 || string(d.records[1].Value) != "b" {
		t.Fatalf("after SetHeader kafka-go read %+v with %d records", d.h, len(d.records))
	}
	if !bytes.Equal(before, b[headerSize:]) {
		t.Fatal("SetHeader changed the records")
	}
	got, n, err := BatchHeader(b)
	if err != nil || got != h || n != 2 {
		t.Fatalf("BatchHeader = %+v, %d, %v", got, n, err)
	}
}

func TestAppendBatchRejects(t *testing.T) {
	if _, err := AppendBatch(nil, NoProducer, nil, compress.None, time.Now()); err == nil {
		t.Error("empty batch: no error")
	}
	if _, err := AppendBatch(nil, NoProducer, []kafka.Message{{}}, compress.Compression(9), time.Now()); err == nil {
		t.Error("codec 9: no error")
	}
	if err := SetHeader(make([]byte, 10), NoProducer); err == nil {
		t.Error("SetHeader on 10 bytes: no error")
	}
	if _, _, err := BatchHeader(make([]byte, headerSize)); err == nil {
		t.Error("BatchHeader with magic 0: no error")
	}
}

func TestRecordSizeBoundsEncoding(t *testing.T) {
	m := kafka.Message{Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 200), Headers: []kafka.Header{{Key: "h", Value: []byte("x")}}}
	b, err := AppendBatch(nil, NoProducer, []kafka.Message{m, m, m}, compress.None, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got, bound := len(b)-BatchOverhead, 3*RecordSize(&m); got > bound || got < bound-3*16 {
		t.Fatalf("3 records take %d bytes, RecordSize bound %d", got, bound)
	}
}

// FuzzAppendBatch encodes records from the fuzzer's bytes with a producer
// header and a codec, and checks that kafka-go's decoder reads back the
// same header, records and a valid CRC, before and after SetHeader.
func FuzzAppendBatch(f *testing.F) {
	f.Add(int64(7), int16(0), int32(0), uint8(0), []byte("key"), []byte("value"), "h", uint8(3), int64(0))
	f.Add(int64(-1), int16(-1), int32(-1), uint8(4), []byte(nil), []byte{}, "", uint8(1), int64(-5000))
	f.Add(int64(1<<62), int16(32767), int32(2147483647), uint8(2), []byte{0}, bytes.Repeat([]byte{1}, 1000), "x", uint8(40), int64(1))
	f.Fuzz(func(t *testing.T, pid int64, epoch int16, seq int32, codecN uint8, key, value []byte, hkey string, n uint8, step int64) {
		codec := codecs[int(codecN)%len(codecs)]
		count := int(n)%50 + 1
		base := time.UnixMilli(1_700_000_000_000)
		msgs := make([]kafka.Message, count)
		for i := range msgs {
			msgs[i] = kafka.Message{Key: key, Value: value, Time: base.Add(time.Duration(step%1_000_000*int64(i)) * time.Millisecond)}
			if i%2 == 1 {
				msgs[i].Key = nil
				msgs[i].Headers = []kafka.Header{{Key: hkey, Value: value}}
			}
		}
		h := Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
		b := checkRoundTrip(t, h, msgs, codec)
		h2 := Header{ProducerID: pid ^ 1, ProducerEpoch: epoch + 1, BaseSequence: 0}
		if err := SetHeader(b, h2); err != nil {
			t.Fatal(err)
		}
		if d := decodeWithKafkaGo(t, b); d.h != h2 || len(d.records) != count {
			t.Fatalf("after SetHeader: %+v, %d records", d.h, len(d.records))
		}
	})
}

func BenchmarkAppendBatch(b *testing.B) {
	msgs := make([]kafka.Message, 100)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("key-0001"), Value: bytes.Repeat([]byte("v"), 100)}
	}
	for _, codec := range []compress.Compression{compress.None, compress.Snappy} {
		b.Run(codec.String(), func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			now := time.Now()
			for b.Loop() {
				var err error
				buf, err = AppendBatch(buf[:0], Header{ProducerID: 1}, msgs, codec, now)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// A compressed batch larger than maxPooled leaves no scratch buffer of its
// size in the pool.
func TestAppendBatchPoolsNoHugeScratch(t *testing.T) {
	msgs := []kafka.Message{{Value: make([]byte, maxPooled+1)}}
	if _, err := AppendBatch(nil, Header{ProducerID: 1}, msgs, compress.Gzip, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if v := scratchPool.Get().(*[]byte); cap(*v) > maxPooled {
			t.Fatalf("the pool holds a %d-byte scratch buffer, over the %d-byte bound", cap(*v), maxPooled)
		}
	}
}
