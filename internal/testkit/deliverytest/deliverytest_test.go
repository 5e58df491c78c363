package deliverytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestLostAndDuplicated(t *testing.T) {
	sent := Messages("m", 3) // m-0000000, m-0000001, m-0000002
	tests := []struct {
		name            string
		counts          map[string]int
		wantLost, wantD int
	}{
		{"all once", map[string]int{"m-0000000": 1, "m-0000001": 1, "m-0000002": 1}, 0, 0},
		{"none", map[string]int{}, 3, 0},
		{"one lost, one thrice", map[string]int{"m-0000000": 3, "m-0000002": 1}, 1, 2},
		{"unsent values do not count", map[string]int{"m-0000000": 1, "m-0000001": 1, "m-0000002": 1, "x": 5}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lost, dups := LostAndDuplicated(sent, tt.counts)
			if lost != tt.wantLost || dups != tt.wantD {
				t.Errorf("LostAndDuplicated = %d lost, %d duplicates; want %d, %d", lost, dups, tt.wantLost, tt.wantD)
			}
		})
	}
}

func TestMessagesAreDistinct(t *testing.T) {
	msgs := Messages("p", 1000)
	seen := map[string]bool{}
	for _, m := range msgs {
		if string(m.Key) != string(m.Value) {
			t.Fatalf("key %q, value %q: want equal", m.Key, m.Value)
		}
		seen[string(m.Value)] = true
	}
	if len(seen) != len(msgs) {
		t.Errorf("%d distinct values in %d messages", len(seen), len(msgs))
	}
}

// scriptedConsumer hands out msgs in order, then reports an idle fetch
// (the fetch ctx's deadline); it records what was committed.
type scriptedConsumer struct {
	msgs      []kafka.Message
	committed map[int]int64 // partition -> next offset to read
	commitErr error
}

func (c *scriptedConsumer) FetchMessage(ctx context.Context) (kafka.Message, error) {
	if len(c.msgs) == 0 {
		<-ctx.Done()
		return kafka.Message{}, ctx.Err()
	}
	m := c.msgs[0]
	c.msgs = c.msgs[1:]
	return m, nil
}

func (c *scriptedConsumer) CommitMessages(_ context.Context, msgs ...kafka.Message) error {
	if c.commitErr != nil {
		return c.commitErr
	}
	for _, m := range msgs {
		c.committed[m.Partition] = m.Offset + 1
	}
	return nil
}

func TestConsumeToEnd(t *testing.T) {
	// Two partitions; partition 1 re-delivers offset 0 after offset 1, as a
	// new group generation starting from an older commit would.
	msg := func(p int, off int64, v string) kafka.Message {
		return kafka.Message{Partition: p, Offset: off, Value: []byte(v)}
	}
	script := []kafka.Message{msg(0, 0, "a"), msg(1, 0, "b"), msg(1, 1, "c"), msg(1, 0, "b"), msg(0, 1, "d"), msg(1, 1, "c")}
	ends := map[int]int64{0: 2, 1: 2}

	t.Run("reads to the end offsets and commits them", func(t *testing.T) {
		c := &scriptedConsumer{msgs: script, committed: map[int]int64{}}
		endsCh := make(chan map[int]int64, 1)
		endsCh <- ends
		seen := map[string]int{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ConsumeToEnd(ctx, c, 4, endsCh, seen); err != nil {
			t.Fatalf("ConsumeToEnd: %v", err)
		}
		if seen["b"] != 2 || seen["c"] != 2 || len(seen) != 4 {
			t.Errorf("seen = %v, want a, d once and b, c twice", seen)
		}
		for p, e := range ends {
			if c.committed[p] != e {
				t.Errorf("partition %d: committed %d, want the end offset %d", p, c.committed[p], e)
			}
		}
	})
	t.Run("waits for the end offsets", func(t *testing.T) {
		c := &scriptedConsumer{msgs: script, committed: map[int]int64{}}
		ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
		defer cancel()
		err := ConsumeToEnd(ctx, c, 4, make(chan map[int]int64), map[string]int{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ConsumeToEnd with no end offsets = %v, want the ctx's deadline", err)
		}
	})
	t.Run("returns a commit error", func(t *testing.T) {
		boom := errors.New("commit refused")
		c := &scriptedConsumer{msgs: script, committed: map[int]int64{}, commitErr: boom}
		endsCh := make(chan map[int]int64, 1)
		endsCh <- ends
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ConsumeToEnd(ctx, c, 4, endsCh, map[string]int{}); !errors.Is(err, boom) {
			t.Errorf("ConsumeToEnd = %v, want %v", err, boom)
		}
	})
}
