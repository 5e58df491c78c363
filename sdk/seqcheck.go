package sdk

// seqcheck.go watches the idempotent Writer's produce responses on the
// wire (seqConn): a resent batch a restarted broker answers out of
// sequence is checked with the partition's leader (see
// writer_idempotence.go) and counted delivered when the leader holds it.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
)

// seqCheckTimeout bounds how long a produce response waits for the
// leader's answer about the producer's sequence (seqConn). Within kgo's
// produce read timeout (the Writer's WriteTimeout plus as much again).
const seqCheckTimeout = 5 * time.Second

// unknownBaseOffset is the base offset of a resent batch the broker stored
// before (seqConn): far below any real offset, so the Writer reports -1 for
// its messages and the engine's later checks of acknowledged offsets skip
// it.
const unknownBaseOffset = -1 << 62

// A restarted Kafka broker remembers only each producer's last batch per
// partition (its producer-state snapshot holds one; the 5 it checks
// duplicates against are rebuilt only from the log it replays). An
// idempotent Writer with several produce requests in flight whose
// connection died with the broker resends them all; the broker answers
// the ones it stored but no longer recognises OUT_OF_ORDER_SEQUENCE_NUMBER,
// and the engine would then renumber them under a new epoch and store them
// twice. seqConn sits on the Writer's connections, notes the idempotent
// batches of each Produce request, and when a response says
// OUT_OF_ORDER_SEQUENCE_NUMBER for one, asks the partition's leader
// (DescribeProducers) how far the producer's sequence got: when the batch
// is within it, the broker stored the batch (it accepts each producer's
// sequence numbers only in order), and the response is handed to the
// engine as DUPLICATE_SEQUENCE_NUMBER, which it counts delivered. When the
// leader cannot say (no Read permission on the topic, the epoch moved on)
// the answer passes unchanged.

// seqResolver returns the last sequence number the leader of
// topic/partition holds for the producer, and whether it knows the
// producer at that epoch. topic is "" when the request named the topic by
// ID.
type seqResolver func(ctx context.Context, topic string, topicID [16]byte, partition int32, pid int64, epoch int16) (int32, bool, error)

// seqCheck is shared by a Writer's connections.
type seqCheck struct {
	resolve seqResolver
	// resolved runs for each batch answered as a duplicate.
	resolved func(addr string, b sentBatch, last int32)
	// producer, when set, hears the producer ID and epoch of every
	// request's batches (metrics).
	producer *producerWatch
}

// sentBatch is an idempotent record batch of a Produce request.
type sentBatch struct {
	topic       string
	topicID     [16]byte
	partition   int32
	pid         int64
	epoch       int16
	first, last int32 // sequence numbers
}

type sentProduce struct {
	corr    int32
	version int16
	batches []sentBatch
}

// maxCheckedResponse is the largest Produce response seqConn reads whole;
// a larger one passes unchanged (a response is about 50 bytes per
// partition).
const maxCheckedResponse = 4 << 20

// maxTopicNames bounds the topic names a connection keeps interned.
const maxTopicNames = 1024

type seqConn struct {
	net.Conn
	check *seqCheck
	addr  string

	mu    sync.Mutex
	queue []sentProduce // tracked requests not answered yet, in order
	head  int           // queue[head:] are pending
	spare [][]sentBatch // batch lists to reuse
	off   bool          // a write that is not one whole frame: pass everything

	// Write side, used by the writing goroutine (under mu).
	req   kmsg.ProduceRequest
	names map[string]string // interned topic names

	// Read side, used by the reading goroutine only.
	left  int    // bytes of the current response still to pass through
	buf   []byte // bytes of a response read ahead, to hand out first
	hdr   [8]byte
	frame []byte // a tracked response, read whole
}

func (c *seqConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if !c.off {
		if ok := c.noteProduce(b); !ok && !isFrame(b) {
			c.off = true
			c.queue, c.head = c.queue[:0], 0
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// pendingLocked returns the tracked request that response corr answers,
// dropping those before it (their answers cannot come any more: answers
// come in order).
func (c *seqConn) pendingLocked(corr int32) (sentProduce, bool) {
	var sp sentProduce
	found := false
	for c.head < len(c.queue) {
		h := c.queue[c.head]
		if h.corr == corr {
			sp, found = h, true
			c.head++
			break
		}
		if corr-h.corr < 0 { // a later request: corr answers an untracked one
			break
		}
		c.spare = append(c.spare, h.batches[:0])
		c.head++
	}
	if c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	}
	return sp, found
}

// isFrame reports whether b is one whole request frame.
func isFrame(b []byte) bool {
	return len(b) >= 8 && int(binary.BigEndian.Uint32(b)) == len(b)-4
}

func (c *seqConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	if c.left > 0 {
		n, err := c.Conn.Read(p[:min(len(p), c.left)])
		c.left -= n
		return n, err
	}
	c.mu.Lock()
	off, tracking := c.off, c.head < len(c.queue)
	c.mu.Unlock()
	if off || !tracking {
		// Nothing awaits a check: keep track of the frame boundaries
		// only when a request is pending (responses come in order, so
		// the next frame starts at a boundary whenever none is).
		return c.passThrough(p)
	}
	if _, err := io.ReadFull(c.Conn, c.hdr[:]); err != nil {
		return 0, err
	}
	size := int(int32(binary.BigEndian.Uint32(c.hdr[:])))
	corr := int32(binary.BigEndian.Uint32(c.hdr[4:]))
	if size < 4 {
		// Not a response frame: stop looking.
		c.mu.Lock()
		c.off = true
		c.mu.Unlock()
		c.buf = c.hdr[:]
		return c.Read(p)
	}
	c.mu.Lock()
	sp, ok := c.pendingLocked(corr)
	c.mu.Unlock()
	if !ok || size > maxCheckedResponse {
		c.recycle(sp)
		c.buf = c.hdr[:]
		c.left = size - 4
		return c.Read(p)
	}
	if cap(c.frame) < 4+size {
		c.frame = make([]byte, 4+size)
	}
	frame := c.frame[:4+size]
	copy(frame, c.hdr[:])
	if _, err := io.ReadFull(c.Conn, frame[8:]); err != nil {
		c.recycle(sp)
		return 0, err
	}
	c.buf = c.checkResponse(frame, sp)
	c.recycle(sp)
	if cap(c.frame) > 64<<10 {
		c.frame = nil // c.buf still holds it; keep no large buffer
	}
	return c.Read(p)
}

// recycle keeps sp's batch list for a later request.
func (c *seqConn) recycle(sp sentProduce) {
	if sp.batches == nil {
		return
	}
	c.mu.Lock()
	c.spare = append(c.spare, sp.batches[:0])
	c.mu.Unlock()
}

// passThrough reads the next frame's bytes while no request is pending.
// It must still know where the frame ends, since a request may become
// pending while it is read.
func (c *seqConn) passThrough(p []byte) (int, error) {
	c.mu.Lock()
	off := c.off
	c.mu.Unlock()
	if off {
		return c.Conn.Read(p)
	}
	if _, err := io.ReadFull(c.Conn, c.hdr[:4]); err != nil {
		return 0, err
	}
	c.buf = c.hdr[:4]
	c.left = max(int(int32(binary.BigEndian.Uint32(c.hdr[:]))), 0)
	return c.Read(p)
}

var oooSeqCode = []byte{0, byte(kerr.OutOfOrderSequenceNumber.Code)}

// checkResponse returns the Produce response frame with each partition
// answered OUT_OF_ORDER_SEQUENCE_NUMBER whose batch the leader holds
// answered DUPLICATE_SEQUENCE_NUMBER instead, or frame unchanged.
func (c *seqConn) checkResponse(frame []byte, sp sentProduce) []byte {
	if !bytes.Contains(frame[8:], oooSeqCode) {
		return frame
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = sp.version
	body := 8
	if resp.IsFlexible() {
		n, err := kframe.SkipTags(frame[body:], 0)
		if err != nil {
			return frame
		}
		body += n
	}
	if err := resp.ReadFrom(frame[body:]); err != nil {
		return frame
	}
	ctx, cancel := context.WithTimeout(context.Background(), seqCheckTimeout)
	defer cancel()
	changed := false
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
				continue
			}
			b, ok := sp.find(t.Topic, t.TopicID, p.Partition)
			if !ok {
				continue
			}
			last, known, err := c.check.resolve(ctx, b.topic, b.topicID, b.partition, b.pid, b.epoch)
			if err != nil || !known || !seqHeld(b.last, last) {
				continue
			}
			p.ErrorCode = kerr.DuplicateSequenceNumber.Code
			p.BaseOffset = unknownBaseOffset
			changed = true
			if c.check.resolved != nil {
				c.check.resolved(c.addr, b, last)
			}
		}
	}
	if !changed {
		return frame
	}
	out := append(make([]byte, 0, len(frame)), frame[:body]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func (sp sentProduce) find(topic string, id [16]byte, partition int32) (sentBatch, bool) {
	for _, b := range sp.batches {
		if b.partition == partition && (topic != "" && b.topic == topic || topic == "" && b.topicID == id) {
			return b, true
		}
	}
	return sentBatch{}, false
}

// seqHeld reports whether sequence number seq is at or before last, the
// last one a broker holds; sequence numbers wrap from MaxInt32 to 0.
func seqHeld(seq, last int32) bool {
	d := (int64(last) - int64(seq)) & (1<<31 - 1)
	return d < 1<<30
}

// noteProduce queues the idempotent batches of b when b is one whole
// Produce request frame that expects an answer (acks other than 0), and
// reports whether b was a Produce request frame. Called under mu.
func (c *seqConn) noteProduce(b []byte) bool {
	if !isFrame(b) || len(b) < 14 || int16(binary.BigEndian.Uint16(b[4:])) != int16(kmsg.Produce) {
		return false
	}
	req := &c.req
	req.Version = int16(binary.BigEndian.Uint16(b[6:]))
	corr := int32(binary.BigEndian.Uint32(b[8:]))
	off := 12
	if n := int(int16(binary.BigEndian.Uint16(b[off:]))); n > 0 {
		off += n
	}
	off += 2
	if off > len(b) {
		return false
	}
	if req.IsFlexible() {
		n, err := kframe.SkipTags(b[off:], 0)
		if err != nil {
			return false
		}
		off += n
	}
	// Unsafe: the strings and records alias b, which the engine reuses
	// after Write; what is kept is copied (names) or read (headers).
	if err := req.UnsafeReadFrom(b[off:]); err != nil {
		return false
	}
	if req.Acks == 0 {
		return true
	}
	var batches []sentBatch
	if n := len(c.spare); n > 0 {
		batches, c.spare = c.spare[n-1], c.spare[:n-1]
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if bt, ok := idempotentBatch(p.Records); ok {
				bt.topic, bt.topicID, bt.partition = c.name(t.Topic), t.TopicID, p.Partition
				batches = append(batches, bt)
			}
		}
	}
	if len(batches) == 0 {
		c.spare = append(c.spare, batches)
		return true
	}
	if p := c.check.producer; p != nil {
		p.saw(batches[0].pid, batches[0].epoch)
	}
	c.queue = append(c.queue, sentProduce{corr: corr, version: req.Version, batches: batches})
	return true
}

// name returns topic as a string of its own (topic aliases the request).
func (c *seqConn) name(topic string) string {
	if topic == "" {
		return ""
	}
	if n, ok := c.names[topic]; ok {
		return n
	}
	if len(c.names) >= maxTopicNames {
		clear(c.names)
	}
	n := strings.Clone(topic)
	c.names[n] = n
	return n
}

// idempotentBatch reads the producer ID, epoch and sequence range of the
// record batches in records (magic 2), if they carry a producer ID.
func idempotentBatch(records []byte) (sentBatch, bool) {
	const header = 61 // a record batch's fixed header
	var bt sentBatch
	found := false
	for len(records) >= header {
		length := int(int32(binary.BigEndian.Uint32(records[8:])))
		if records[16] != 2 || length < header-12 || length > len(records)-12 {
			return sentBatch{}, false
		}
		pid := int64(binary.BigEndian.Uint64(records[43:]))
		epoch := int16(binary.BigEndian.Uint16(records[51:]))
		seq := int32(binary.BigEndian.Uint32(records[53:]))
		delta := int32(binary.BigEndian.Uint32(records[23:]))
		if pid < 0 || seq < 0 || delta < 0 || found && (pid != bt.pid || epoch != bt.epoch) {
			return sentBatch{}, false
		}
		if !found {
			bt.pid, bt.epoch, bt.first = pid, epoch, seq
			found = true
		}
		bt.last = int32((int64(seq) + int64(delta)) & (1<<31 - 1))
		records = records[12+length:]
	}
	return bt, found
}

// newSeqConn puts the check on c, a connection to addr.
func newSeqConn(c net.Conn, check *seqCheck, addr string) net.Conn {
	return &seqConn{Conn: c, check: check, addr: addr, names: map[string]string{}}
}

func (b sentBatch) String() string {
	return fmt.Sprintf("producer %d epoch %d, sequence %d-%d", b.pid, b.epoch, b.first, b.last)
}
