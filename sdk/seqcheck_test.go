package sdk

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
)

// batchHeader is a record batch header (magic 2, no records) of producer
// pid at epoch, sequence numbers seq..seq+n-1.
func batchHeader(pid int64, epoch int16, seq, n int32) []byte {
	b := make([]byte, 61)
	binary.BigEndian.PutUint32(b[8:], 61-12)
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	return b
}

var testTopicID = [16]byte{1, 2, 3}

// produceFrame is a Produce request frame at version with one batch on
// partition 3 of topic "t" (by ID from v13).
func produceFrame(version int16, corr int32, acks int16, records []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "t", testTopicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 3, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	b := binary.BigEndian.AppendUint16(make([]byte, 4, 256), uint16(kmsg.Produce))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 2)
	b = append(b, "id"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// produceAnswer is the response frame to produceFrame with code.
func produceAnswer(version int16, corr int32, code int16) []byte {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = version
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic, rt.TopicID = "t", testTopicID
	rp := kmsg.NewProduceResponseTopicPartition()
	rp.Partition, rp.ErrorCode, rp.BaseOffset = 3, code, -1
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	b := binary.BigEndian.AppendUint32(make([]byte, 4, 256), uint32(corr))
	if resp.IsFlexible() {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// seqExchange writes each request through a seqConn to a server that answers
// it with the matching response, and returns what the client reads, read
// a few bytes at a time.
func seqExchange(t *testing.T, check *seqCheck, reqs, resps [][]byte) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	sc := newSeqConn(client, check, "broker:9092")
	go func() {
		defer server.Close()
		for i := range reqs {
			if _, err := io.ReadFull(server, make([]byte, len(reqs[i]))); err != nil {
				return
			}
			if _, err := server.Write(resps[i]); err != nil {
				return
			}
		}
	}()
	var got bytes.Buffer
	for i := range reqs {
		if _, err := sc.Write(reqs[i]); err != nil {
			t.Fatal(err)
		}
		// One frame, read a few bytes at a time.
		size := -1
		start := got.Len()
		buf := make([]byte, 3)
		for size < 0 || got.Len() < start+4+size {
			want := 3
			if size < 0 {
				want = min(3, start+4-got.Len())
			} else {
				want = min(3, start+4+size-got.Len())
			}
			n, err := sc.Read(buf[:want])
			got.Write(buf[:n])
			if err != nil {
				t.Fatalf("read after %d bytes: %v", got.Len(), err)
			}
			if size < 0 && got.Len() >= start+4 {
				size = int(binary.BigEndian.Uint32(got.Bytes()[start:]))
			}
		}
	}
	return got.Bytes()
}

func partitionAnswer(t *testing.T, version int16, frame []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = version
	off := 8
	if resp.IsFlexible() {
		off++
	}
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		t.Fatalf("frame size %d, %d bytes", binary.BigEndian.Uint32(frame), len(frame))
	}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

func TestSeqConnResolvesStoredResends(t *testing.T) {
	const pid, epoch = 77, 3
	type asked struct {
		topic string
		id    [16]byte
		part  int32
		pid   int64
		epoch int16
	}
	for _, tc := range []struct {
		name     string
		version  int16
		acks     int16
		last     int32 // the leader's last sequence of the producer
		known    bool  // the leader knows the producer at epoch
		err      error
		wantCode int16
	}{
		{"v7 stored", 7, -1, 30, true, nil, kerr.DuplicateSequenceNumber.Code},
		{"v9 stored", 9, -1, 19, true, nil, kerr.DuplicateSequenceNumber.Code},
		{"v13 by topic ID", 13, -1, 19, true, nil, kerr.DuplicateSequenceNumber.Code},
		{"acks 1 stored", 9, 1, 19, true, nil, kerr.DuplicateSequenceNumber.Code},
		{"a gap: not stored", 9, -1, 15, true, nil, kerr.OutOfOrderSequenceNumber.Code},
		{"the epoch moved on", 9, -1, 40, false, nil, kerr.OutOfOrderSequenceNumber.Code},
		{"the leader cannot say", 9, -1, 40, true, kerr.TopicAuthorizationFailed, kerr.OutOfOrderSequenceNumber.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []asked
			var resolved int
			check := &seqCheck{
				resolve: func(_ context.Context, topic string, id [16]byte, part int32, p int64, e int16) (int32, bool, error) {
					got = append(got, asked{topic, id, part, p, e})
					return tc.last, tc.known, tc.err
				},
				resolved: func(addr string, b sentBatch, last int32) {
					resolved++
					if addr != "broker:9092" || b.first != 10 || b.last != 19 || last != tc.last {
						t.Errorf("resolved %s %v, last %d", addr, b, last)
					}
				},
			}
			req := produceFrame(tc.version, 5, tc.acks, batchHeader(pid, epoch, 10, 10))
			out := seqExchange(t, check, [][]byte{req}, [][]byte{produceAnswer(tc.version, 5, kerr.OutOfOrderSequenceNumber.Code)})
			p := partitionAnswer(t, tc.version, out)
			if p.ErrorCode != tc.wantCode {
				t.Fatalf("error code %d, want %d", p.ErrorCode, tc.wantCode)
			}
			want := asked{"t", [16]byte{}, 3, pid, epoch}
			if tc.version >= 13 {
				want = asked{"", testTopicID, 3, pid, epoch}
			}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("asked %+v, want %+v", got, want)
			}
			if stored := tc.wantCode == kerr.DuplicateSequenceNumber.Code; stored {
				if p.BaseOffset != unknownBaseOffset || resolved != 1 {
					t.Fatalf("base offset %d, resolved %d", p.BaseOffset, resolved)
				}
			} else if resolved != 0 {
				t.Fatalf("resolved %d", resolved)
			}
		})
	}
}

// TestSeqConnPassesOtherFrames: answers other than an out-of-order
// sequence, requests without idempotent batches and other keys reach the
// engine byte for byte, with no question to the leader.
func TestSeqConnPassesOtherFrames(t *testing.T) {
	check := &seqCheck{resolve: func(context.Context, string, [16]byte, int32, int64, int16) (int32, bool, error) {
		t.Error("the leader was asked")
		return 0, false, errors.New("no")
	}}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	metaReq := binary.BigEndian.AppendUint16(make([]byte, 4), uint16(kmsg.Metadata))
	metaReq = binary.BigEndian.AppendUint16(metaReq, 9)
	metaReq = binary.BigEndian.AppendUint32(metaReq, 1)
	metaReq = append(binary.BigEndian.AppendUint16(metaReq, 0), 0)
	metaReq = meta.AppendTo(metaReq)
	binary.BigEndian.PutUint32(metaReq, uint32(len(metaReq)-4))
	// An answer to Metadata that holds the out-of-order code's bytes.
	metaResp := []byte{0, 0, 0, 8, 0, 0, 0, 1, 0, 45, 0, 45}
	reqs := [][]byte{
		produceFrame(9, 2, -1, batchHeader(7, 0, 0, 5)),
		produceFrame(9, 3, -1, batchHeader(-1, -1, -1, 5)), // not idempotent
		metaReq,
		produceFrame(13, 4, -1, batchHeader(7, 0, 5, 5)),
	}
	resps := [][]byte{
		produceAnswer(9, 2, 0),
		produceAnswer(9, 3, kerr.OutOfOrderSequenceNumber.Code),
		metaResp,
		produceAnswer(13, 4, kerr.NotLeaderForPartition.Code),
	}
	got := seqExchange(t, check, reqs, resps)
	if want := bytes.Join(resps, nil); !bytes.Equal(got, want) {
		t.Fatalf("read %x\nwant %x", got, want)
	}
}

// TestSeqConnStopsOnPartialWrites: a write that is not one whole frame
// (a SASL v0 token, say) turns the check off; bytes pass unchanged.
func TestSeqConnStopsOnPartialWrites(t *testing.T) {
	check := &seqCheck{resolve: func(context.Context, string, [16]byte, int32, int64, int16) (int32, bool, error) {
		return 100, true, nil
	}}
	req := produceFrame(9, 2, -1, batchHeader(7, 0, 0, 5))
	client, server := net.Pipe()
	defer client.Close()
	sc := newSeqConn(client, check, "b")
	resp := produceAnswer(9, 2, kerr.OutOfOrderSequenceNumber.Code)
	go func() {
		defer server.Close()
		io.ReadFull(server, make([]byte, len(req)))
		server.Write(resp)
	}()
	if _, err := sc.Write(req[:10]); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Write(req[10:]); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(resp))
	if _, err := io.ReadFull(sc, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, resp) {
		t.Fatal("the answer changed")
	}
}

func TestSeqHeld(t *testing.T) {
	for _, tc := range []struct {
		seq, last int32
		want      bool
	}{
		{10, 10, true}, {10, 19, true}, {19, 10, false}, {0, 0, true},
		{math.MaxInt32, 2, true}, // the producer's sequence wrapped
		{math.MaxInt32 - 5, 3, true},
		{2, math.MaxInt32, false}, {3, math.MaxInt32 - 5, false}, {0, math.MaxInt32, false}, // seq came after the wrap
		{5, 4, false}, {1 << 30, 0, false},
	} {
		if got := seqHeld(tc.seq, tc.last); got != tc.want {
			t.Errorf("seqHeld(%d, %d) = %v, want %v", tc.seq, tc.last, got, tc.want)
		}
	}
}

// FuzzSeqConnResponse: whatever a broker answers to a tracked Produce
// request, the check neither panics nor changes bytes it does not
// understand, and the engine reads as many frames as the broker sent.
func FuzzSeqConnResponse(f *testing.F) {
	f.Add(produceAnswer(9, 2, kerr.OutOfOrderSequenceNumber.Code)[8:])
	f.Add(produceAnswer(9, 2, 0)[8:])
	f.Add([]byte{0, 45, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, body []byte) {
		check := &seqCheck{resolve: func(context.Context, string, [16]byte, int32, int64, int16) (int32, bool, error) {
			return 100, true, nil
		}}
		frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
		frame = binary.BigEndian.AppendUint32(frame, 2)
		frame = append(frame, body...)
		out := seqExchange(t, check, [][]byte{produceFrame(9, 2, -1, batchHeader(7, 0, 0, 5))}, [][]byte{frame})
		if !bytes.Equal(out, frame) {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = 9
			if n, err := kframe.SkipTags(frame[8:], 0); err != nil || resp.ReadFrom(frame[8+n:]) != nil {
				t.Fatal("changed a frame that does not parse")
			}
			if len(out) > 2*len(frame)+64 {
				t.Fatalf("a frame of %d bytes grew to %d", len(frame), len(out))
			}
		}
	})
}

// TestSeqConnPipelined: requests in flight together, tracked and not,
// are matched to their answers in order; only the tracked answer that
// says out of sequence is checked.
func TestSeqConnPipelined(t *testing.T) {
	var asked []int32
	check := &seqCheck{resolve: func(_ context.Context, _ string, _ [16]byte, _ int32, _ int64, _ int16) (int32, bool, error) {
		asked = append(asked, 0)
		return 100, true, nil
	}}
	client, server := net.Pipe()
	defer client.Close()
	sc := newSeqConn(client, check, "b")
	reqs := [][]byte{
		produceFrame(9, 1, -1, batchHeader(7, 0, 0, 5)),
		produceFrame(9, 2, -1, batchHeader(-1, -1, -1, 5)), // not idempotent: untracked
		produceFrame(9, 3, -1, batchHeader(7, 0, 5, 5)),
		produceFrame(9, 4, -1, batchHeader(7, 0, 10, 5)),
	}
	resps := [][]byte{
		produceAnswer(9, 1, 0),
		produceAnswer(9, 2, kerr.OutOfOrderSequenceNumber.Code),
		produceAnswer(9, 3, kerr.OutOfOrderSequenceNumber.Code),
		produceAnswer(9, 4, 0),
	}
	go func() {
		defer server.Close()
		for _, r := range reqs {
			if _, err := io.ReadFull(server, make([]byte, len(r))); err != nil {
				return
			}
		}
		for _, r := range resps {
			if _, err := server.Write(r); err != nil {
				return
			}
		}
	}()
	for _, r := range reqs {
		if _, err := sc.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []int16{0, kerr.OutOfOrderSequenceNumber.Code, kerr.DuplicateSequenceNumber.Code, 0} {
		size := make([]byte, 4)
		if _, err := io.ReadFull(sc, size); err != nil {
			t.Fatal(err)
		}
		frame := append(size, make([]byte, binary.BigEndian.Uint32(size))...)
		if _, err := io.ReadFull(sc, frame[4:]); err != nil {
			t.Fatal(err)
		}
		if got := partitionAnswer(t, 9, frame).ErrorCode; got != want {
			t.Fatalf("answer %d: error code %d, want %d", i+1, got, want)
		}
	}
	if len(asked) != 1 {
		t.Fatalf("the leader was asked %d times, want 1", len(asked))
	}
}
