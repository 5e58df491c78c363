// Package deliverytest holds the delivery checks and fault tools that the
// hermetic tests (sdk and internal/testkit/azsim, on the embedded broker) and the
// conformance suite (on a real broker) share, so that both count lost and
// duplicated messages, consume to the end, check committed offsets, inject
// faults, run reconnect storms and judge an azsim story's report the same
// way.
//
// The shortest use, after producing sent to a topic:
//
//	topic := deliverytest.Topic{Addrs: addrs, Name: "t", Partitions: 3}
//	lost, dups := deliverytest.LostAndDuplicated(sent, deliverytest.ConsumeAll(ctx, t, topic))
//
// It is test support: the functions that assert take a testing.TB and stop
// the test with t.Fatal when the broker cannot be read.
package deliverytest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// Topic is a topic as the checks read it: straight from the broker, never
// through a fault.
type Topic struct {
	// Addrs are the brokers to read from; ConsumeAll dials the first.
	Addrs []string
	// TLS is the client TLS config when the broker speaks TLS, else nil.
	TLS *tls.Config
	// SASL authenticates the checks when the broker requires it, else nil.
	SASL       sasl.Mechanism
	Name       string
	Partitions int
}

func (tp Topic) client() *kafka.Client {
	// No Timeout of its own: the caller's ctx bounds every request.
	cl := &kafka.Client{Addr: kafka.TCP(tp.Addrs...)}
	if tp.TLS != nil || tp.SASL != nil {
		cl.Transport = &kafka.Transport{TLS: tp.TLS, SASL: tp.SASL}
	}
	return cl
}

// Logger is a kafka.Logger that writes through tb until the test ends:
// kafka-go's goroutines may still log after a Reader's or Writer's Close
// returned, and logging through tb after the test panics.
func Logger(tb testing.TB, prefix string) kafka.Logger {
	var mu sync.Mutex
	done := false
	tb.Cleanup(func() {
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return kafka.LoggerFunc(func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			tb.Logf(prefix+f, a...)
		}
	})
}

// LogBuffer collects output written from several goroutines, such as a
// slog handler's; the zero value is ready.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RackCounter counts the bytes a client writes to and reads from the
// brokers of each rack: give Dial to kafka-go as the base dial function
// (kafka.Transport.Dial, kafka.Dialer.DialFunc).
type RackCounter struct {
	// RackOf maps a broker address to its rack; others count as
	// "unknown:<addr>".
	RackOf map[string]string
	mu     sync.Mutex
	out    map[string]int64
	in     map[string]int64
}

// NewRackCounter counts by the racks of rackOf.
func NewRackCounter(rackOf map[string]string) *RackCounter {
	return &RackCounter{RackOf: rackOf, out: map[string]int64{}, in: map[string]int64{}}
}

// Dial dials addr and counts what passes on the connection.
func (rc *RackCounter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	rack, ok := rc.RackOf[addr]
	if !ok {
		rack = "unknown:" + addr
	}
	return &rackConn{Conn: conn, rc: rc, rack: rack}, nil
}

// Written returns the bytes written per rack.
func (rc *RackCounter) Written() map[string]int64 { return rc.snapshot(rc.out) }

// Read returns the bytes read per rack.
func (rc *RackCounter) Read() map[string]int64 { return rc.snapshot(rc.in) }

func (rc *RackCounter) snapshot(m map[string]int64) map[string]int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type rackConn struct {
	net.Conn
	rc   *RackCounter
	rack string
}

func (c *rackConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.rc.mu.Lock()
	c.rc.out[c.rack] += int64(n)
	c.rc.mu.Unlock()
	return n, err
}

func (c *rackConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.rc.mu.Lock()
	c.rc.in[c.rack] += int64(n)
	c.rc.mu.Unlock()
	return n, err
}

// Messages returns n messages whose values (and keys) are distinct:
// prefix, a dash and the index in 7 digits.
func Messages(prefix string, n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		v := fmt.Sprintf("%s-%07d", prefix, i)
		msgs[i] = kafka.Message{Key: []byte(v), Value: []byte(v)}
	}
	return msgs
}

// LostAndDuplicated compares what was sent with counts (how often each
// value was read): lost is how many sent values were never read, dups how
// many reads were beyond the first of a value.
func LostAndDuplicated(sent []kafka.Message, counts map[string]int) (lost, dups int) {
	for _, m := range sent {
		switch n := counts[string(m.Value)]; {
		case n == 0:
			lost++
		case n > 1:
			dups += n - 1
		}
	}
	return lost, dups
}

// ConsumeAll reads every partition of topic from the start up to its last
// offset and counts each value. ctx must carry a deadline: it bounds the
// dials and is the deadline of every read.
func ConsumeAll(ctx context.Context, tb testing.TB, topic Topic) map[string]int {
	tb.Helper()
	deadline, ok := ctx.Deadline()
	if !ok {
		tb.Fatal("deliverytest.ConsumeAll: ctx has no deadline")
	}
	d := &kafka.Dialer{TLS: topic.TLS, SASLMechanism: topic.SASL}
	counts := map[string]int{}
	for p := 0; p < topic.Partitions; p++ {
		conn, err := d.DialLeader(ctx, "tcp", topic.Addrs[0], topic.Name, p)
		if err != nil {
			tb.Fatalf("dial leader of partition %d: %v", p, err)
		}
		last, err := conn.ReadLastOffset()
		if err != nil {
			tb.Fatalf("last offset of partition %d: %v", p, err)
		}
		if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
			tb.Fatal(err)
		}
		for off := int64(0); off < last; {
			_ = conn.SetReadDeadline(deadline)
			batch := conn.ReadBatch(1, 16<<20)
			for {
				m, err := batch.ReadMessage()
				if err != nil {
					break
				}
				counts[string(m.Value)]++
				off = m.Offset + 1
			}
			if err := batch.Close(); err != nil && !errors.Is(err, io.EOF) {
				tb.Fatalf("reading partition %d at offset %d: %v", p, off, err)
			}
		}
		conn.Close()
	}
	return counts
}

// PartitionValues reads every partition of topic straight from the broker
// and returns each partition's values in offset order: what per-partition
// order checks compare with the order messages were handed over in.
func PartitionValues(ctx context.Context, tb testing.TB, topic Topic) [][]string {
	tb.Helper()
	cl := topic.client()
	ends := EndOffsets(ctx, tb, topic)
	out := make([][]string, topic.Partitions)
	for p := 0; p < topic.Partitions; p++ {
		for off := int64(0); off < ends[p]; {
			res, err := cl.Fetch(ctx, &kafka.FetchRequest{Topic: topic.Name, Partition: p, Offset: off, MaxBytes: 16 << 20})
			if err != nil || res.Error != nil {
				tb.Fatalf("fetch partition %d at %d: %v %v", p, off, err, res.Error)
			}
			for {
				rec, err := res.Records.ReadRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					tb.Fatalf("partition %d at %d: %v", p, off, err)
				}
				v, _ := io.ReadAll(rec.Value)
				out[p] = append(out[p], string(v))
				off = rec.Offset + 1
			}
		}
	}
	return out
}

// EndOffsets returns the end offset of every partition of topic.
func EndOffsets(ctx context.Context, tb testing.TB, topic Topic) map[int]int64 {
	tb.Helper()
	end, _ := endAndCommitted(ctx, tb, topic, "")
	return end
}

// RequireCommittedToEnd checks that group's committed offset of every
// partition of topic is the partition's end offset.
func RequireCommittedToEnd(ctx context.Context, tb testing.TB, topic Topic, group string) {
	tb.Helper()
	end, committed := endAndCommitted(ctx, tb, topic, group)
	for _, po := range committed {
		if po.CommittedOffset != end[po.Partition] {
			tb.Errorf("partition %d: committed offset %d, end offset %d", po.Partition, po.CommittedOffset, end[po.Partition])
		}
	}
}

// endAndCommitted lists the end offsets of topic and, unless group is
// empty, the group's committed offsets.
func endAndCommitted(ctx context.Context, tb testing.TB, topic Topic, group string) (map[int]int64, []kafka.OffsetFetchPartition) {
	tb.Helper()
	cl := topic.client()
	var parts []int
	var reqs []kafka.OffsetRequest
	for p := 0; p < topic.Partitions; p++ {
		parts = append(parts, p)
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	res, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic.Name: reqs}})
	if err != nil {
		tb.Fatalf("ListOffsets: %v", err)
	}
	end := map[int]int64{}
	for _, po := range res.Topics[topic.Name] {
		end[po.Partition] = po.LastOffset
	}
	if group == "" {
		return end, nil
	}
	committed, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic.Name: parts}})
	if err != nil {
		tb.Fatalf("OffsetFetch: %v", err)
	}
	return end, committed.Topics[topic.Name]
}

// Consumer is what ConsumeToEnd reads with: a consumer-group reader such
// as sdk.Reader or kafka.Reader.
type Consumer interface {
	FetchMessage(context.Context) (kafka.Message, error)
	CommitMessages(context.Context, ...kafka.Message) error
}

// ConsumeToEnd reads with r, counting values in seen and committing every
// 500 messages and whenever it is idle (no message for 500 ms), until it
// has seen n distinct values, read every partition up to the end offsets
// that arrive on ends (sent once production is over) and committed all it
// read. It returns the first error of FetchMessage (other than its idle
// timeout) or CommitMessages, and ctx's error when ctx ends first.
//
// Reading to the end matters: a commit retried into the next group
// generation can land after that generation started from the older
// committed offset, so the group re-delivers messages, and committing
// those again moves the offset back to them until the consumer has read
// past them once more.
func ConsumeToEnd(ctx context.Context, r Consumer, n int, ends <-chan map[int]int64, seen map[string]int) error {
	var pending []kafka.Message
	last := map[int]int64{}
	var end map[int]int64
	caughtUp := func() bool {
		if end == nil || len(seen) < n {
			return false
		}
		for p, e := range end {
			if e > 0 && last[p] != e-1 {
				return false
			}
		}
		return true
	}
	commit := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := r.CommitMessages(ctx, pending...)
		pending = pending[:0]
		return err
	}
	for {
		if end == nil {
			select {
			case end = <-ends:
			default:
			}
		}
		if caughtUp() && len(pending) == 0 {
			return nil
		}
		fetchCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		m, err := r.FetchMessage(fetchCtx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if err := commit(); err != nil { // idle: commit what was read
					return err
				}
				continue
			}
			return err
		}
		seen[string(m.Value)]++
		last[m.Partition] = m.Offset
		pending = append(pending, m)
		if len(pending) >= 500 || caughtUp() {
			if err := commit(); err != nil {
				return err
			}
		}
	}
}
