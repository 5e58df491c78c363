//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
)

// TestRoundTripKeyedMessages moves 10,000 keyed messages through the real
// broker with a kafka-go Writer and a consumer-group kafka-go Reader, and
// checks that every message arrives once, byte for byte (key, value,
// headers), with the order of each key's messages kept.
func TestRoundTripKeyedMessages(t *testing.T) {
	const (
		partitions = 6
		keyCount   = 100
		perKey     = 100
		total      = keyCount * perKey
		chunk      = 1000 // messages per WriteMessages call
		idleBudget = 30 * time.Second
	)
	addrs := brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	topic := fmt.Sprintf("azkafka-roundtrip-%d", time.Now().UnixNano())
	group := topic + "-group"
	createTopic(t, ctx, addrs, topic, partitions)
	want := roundTripMessages(keyCount, perKey, rand.New(rand.NewPCG(7, 11)))

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        addrs,
		GroupID:        group,
		Topic:          topic,
		StartOffset:    kafka.FirstOffset,
		MinBytes:       1,
		MaxBytes:       10 << 20,
		MaxWait:        250 * time.Millisecond,
		CommitInterval: 500 * time.Millisecond,
		ErrorLogger:    deliverytest.Logger(t, "reader: "),
	})
	readerClosed := false
	closeReader := func() {
		if !readerClosed {
			readerClosed = true
			if err := r.Close(); err != nil {
				t.Errorf("reader close: %v", err)
			}
		}
	}
	defer closeReader()

	// Consume concurrently with producing, as a real consumer would.
	type consumed struct {
		msgs []kafka.Message
		err  error
	}
	done := make(chan consumed, 1)
	go func() {
		var c consumed
		for len(c.msgs) < total {
			// Lost messages show up as silence: stop after idleBudget
			// without a message instead of waiting for the test deadline.
			read, stop := context.WithTimeout(ctx, idleBudget)
			m, err := r.ReadMessage(read)
			stop()
			if err != nil {
				c.err = fmt.Errorf("no message for %v: %w", idleBudget, err)
				break
			}
			c.msgs = append(c.msgs, m)
		}
		// Anything after the last expected message is a duplicate.
		quiet, stop := context.WithTimeout(ctx, 3*time.Second)
		defer stop()
		for c.err == nil {
			m, err := r.ReadMessage(quiet)
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
					c.err = err
				}
				break
			}
			c.msgs = append(c.msgs, m)
		}
		done <- c
	}()

	w := &kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        topic,
		Balancer:     kafka.Murmur2Balancer{Consistent: true},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    500,
		BatchTimeout: 20 * time.Millisecond,
		ErrorLogger:  deliverytest.Logger(t, "writer: "),
	}
	start := time.Now()
	for i := 0; i < total; i += chunk {
		if err := w.WriteMessages(ctx, want[i:i+chunk]...); err != nil {
			t.Fatalf("write messages %d..%d: %v", i, i+chunk-1, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("writer close: %v", err)
	}
	produced := time.Since(start)

	var got consumed
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatalf("consumer still running at the deadline: %v", ctx.Err())
	}
	t.Logf("produced %d messages in %v; consumed %d in %v", total, produced.Round(time.Millisecond), len(got.msgs), time.Since(start).Round(time.Millisecond))
	if got.err != nil {
		t.Errorf("reader stopped after %d messages: %v", len(got.msgs), got.err)
	}
	checkRoundTrip(t, want, got.msgs)

	// The broker holds each message once, and the group committed all of them.
	closeReader()
	ends := endOffsets(t, ctx, addrs, topic, partitions)
	var stored int64
	for _, e := range ends {
		stored += e
	}
	if stored != total {
		t.Errorf("broker holds %d messages in %s, produced %d", stored, topic, total)
	}
	committed := committedOffsets(t, ctx, addrs, group, topic, partitions)
	for p := range partitions {
		if committed[p] != ends[p] {
			t.Errorf("group %s partition %d: committed offset %d, end offset %d", group, p, committed[p], ends[p])
		}
	}
}

// roundTripMessages returns keyCount*perKey messages for keyCount distinct
// keys, randomly interleaved, with each key's messages in sequence order. Each
// message carries its index in header "azkafka-id" and its per-key sequence
// number in header "seq"; values are random, some empty; some messages carry
// repeated, empty and binary headers.
func roundTripMessages(keyCount, perKey int, rng *rand.Rand) []kafka.Message {
	keys := make([][]byte, keyCount)
	seen := map[string]bool{}
	for i := range keys {
		for {
			var k []byte
			switch i % 4 {
			case 0:
				k = []byte(fmt.Sprintf("user-%d", i))
			case 1:
				k = []byte(fmt.Sprintf("ключ-%d-日本", i))
			default:
				k = randomBytes(rng, 1+rng.IntN(40))
			}
			if !seen[string(k)] {
				seen[string(k)] = true
				keys[i] = k
				break
			}
		}
	}
	next := make([]int, keyCount) // next sequence number per key
	open := make([]int, keyCount) // keys with messages left
	for i := range open {
		open[i] = i
	}
	msgs := make([]kafka.Message, 0, keyCount*perKey)
	for len(open) > 0 {
		j := rng.IntN(len(open))
		k := open[j]
		seq := next[k]
		next[k]++
		if next[k] == perKey {
			open[j] = open[len(open)-1]
			open = open[:len(open)-1]
		}
		var value []byte
		switch n := len(msgs); {
		case n%50 == 0:
			value = []byte{}
		case n%97 == 0:
			value = randomBytes(rng, 64<<10)
		default:
			value = randomBytes(rng, rng.IntN(1024))
		}
		headers := []kafka.Header{
			{Key: "azkafka-id", Value: []byte(strconv.Itoa(len(msgs)))},
			{Key: "seq", Value: []byte(strconv.Itoa(seq))},
		}
		if len(msgs)%7 == 0 {
			headers = append(headers,
				kafka.Header{Key: "dup", Value: []byte("first")},
				kafka.Header{Key: "dup", Value: []byte("second")},
				kafka.Header{Key: "empty", Value: []byte{}},
				kafka.Header{Key: "bin", Value: randomBytes(rng, 16)},
			)
		}
		msgs = append(msgs, kafka.Message{Key: keys[k], Value: value, Headers: headers})
	}
	return msgs
}

// checkRoundTrip compares consumed messages with the produced ones: each
// produced message consumed exactly once with equal key, value and headers,
// and each key's messages consumed in sequence order. It reports at most 10
// problems of each kind.
func checkRoundTrip(t *testing.T, want, got []kafka.Message) {
	t.Helper()
	const show = 10
	var bad, dups, unknown, outOfOrder int
	report := func(count *int, format string, args ...any) {
		t.Helper()
		*count++
		if *count <= show {
			t.Errorf(format, args...)
		}
	}
	seen := make([]bool, len(want))
	nextSeq := map[string]int{}
	partitionOf := map[string]int{}
	for _, m := range got {
		id, err := strconv.Atoi(string(header(m, "azkafka-id")))
		if err != nil || id < 0 || id >= len(want) {
			report(&unknown, "consumed a message with no valid azkafka-id header: partition %d offset %d", m.Partition, m.Offset)
			continue
		}
		if seen[id] {
			report(&dups, "message %d consumed twice (again at partition %d offset %d)", id, m.Partition, m.Offset)
			continue
		}
		seen[id] = true
		w := want[id]
		if !bytes.Equal(m.Key, w.Key) || !bytes.Equal(m.Value, w.Value) || !sameHeaders(m.Headers, w.Headers) {
			report(&bad, "message %d differs: key %x/%x, value %d/%d bytes, headers %d/%d (consumed/produced)",
				id, m.Key, w.Key, len(m.Value), len(w.Value), len(m.Headers), len(w.Headers))
		}
		seq, _ := strconv.Atoi(string(header(w, "seq")))
		k := string(w.Key)
		if seq != nextSeq[k] {
			report(&outOfOrder, "key %x: consumed seq %d, expected seq %d", w.Key, seq, nextSeq[k])
		}
		nextSeq[k] = seq + 1
		if p, ok := partitionOf[k]; ok && p != m.Partition {
			report(&outOfOrder, "key %x: in partitions %d and %d", w.Key, p, m.Partition)
		}
		partitionOf[k] = m.Partition
	}
	var lost int
	for id, ok := range seen {
		if !ok {
			report(&lost, "message %d (key %x seq %s) never consumed", id, want[id].Key, header(want[id], "seq"))
		}
	}
	if bad+dups+unknown+outOfOrder+lost > 0 {
		t.Errorf("of %d produced: %d consumed, %d lost, %d duplicates, %d unknown, %d differing, %d order violations",
			len(want), len(got), lost, dups, unknown, bad, outOfOrder)
	}
}

func header(m kafka.Message, key string) []byte {
	for _, h := range m.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

func sameHeaders(a, b []kafka.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// endOffsets returns the end offset (high watermark) of each partition.
func endOffsets(t *testing.T, ctx context.Context, addrs []string, topic string, partitions int) []int64 {
	t.Helper()
	req := make([]kafka.OffsetRequest, partitions)
	for p := range req {
		req[p] = kafka.LastOffsetOf(p)
	}
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	resp, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: req}})
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	ends := make([]int64, partitions)
	found := 0
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("list offsets of %s partition %d: %v", topic, po.Partition, po.Error)
		}
		if po.Partition >= 0 && po.Partition < partitions {
			ends[po.Partition] = po.LastOffset
			found++
		}
	}
	if found != partitions {
		t.Fatalf("list offsets of %s: %d of %d partitions answered", topic, found, partitions)
	}
	return ends
}

// committedOffsets returns the group's committed offset of each partition.
func committedOffsets(t *testing.T, ctx context.Context, addrs []string, group, topic string, partitions int) []int64 {
	t.Helper()
	ps := make([]int, partitions)
	for p := range ps {
		ps[p] = p
	}
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	resp, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		t.Fatalf("offset fetch for group %s: %v", group, err)
	}
	committed := make([]int64, partitions)
	for i := range committed {
		committed[i] = -1
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("offset fetch for group %s partition %d: %v", group, p.Partition, p.Error)
		}
		if p.Partition >= 0 && p.Partition < partitions {
			committed[p.Partition] = p.CommittedOffset
		}
	}
	return committed
}
