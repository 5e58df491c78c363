package sdk_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// TestReaderMessagesOutliveRecordSlabs: the engine decodes records into
// slabs the Reader lends it again once their records were handed out; a
// message handed out keeps its key, value, headers and offset however
// often the slab it came from is used again, with ReadMessage in a group
// and FetchMessage on a partition.
func TestReaderMessagesOutliveRecordSlabs(t *testing.T) {
	const n = 6000
	for _, mode := range []string{"group", "partition"} {
		t.Run(mode, func(t *testing.T) {
			topic := "slabs-" + mode
			c := embedded.StartT(t, embedded.Topic(topic, 2))
			msgs := make([]kafka.Message, n)
			for i := range msgs {
				msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, "v-%d-%s", i, strings.Repeat("x", i%50))}
				if i%3 == 0 {
					msgs[i].Headers = []kafka.Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}}
				}
			}
			produceTo(t, c.Addrs(), topic, msgs)
			cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: topic, MaxWait: 100 * time.Millisecond}
			if mode == "group" {
				cfg.GroupID, cfg.StartOffset, cfg.CommitInterval = "slabs", kafka.FirstOffset, time.Second
			}
			r, err := sdk.NewReader(cfg, sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" }))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			reused := sdk.RecordSlabsReused()
			var got []kafka.Message
			want := n
			if mode == "partition" {
				// Partition 0's messages only: count them as the Writer
				// placed them.
				want = 0
				for _, m := range msgs {
					if (&kafka.Hash{}).Balance(m, 0, 1) == 0 {
						want++
					}
				}
			}
			for len(got) < want {
				var m kafka.Message
				if mode == "group" {
					m, err = r.ReadMessage(ctx)
				} else {
					m, err = r.FetchMessage(ctx)
				}
				if err != nil {
					t.Fatalf("after %d messages: %v", len(got), err)
				}
				got = append(got, m)
			}
			if sdk.RecordSlabsReused() == reused {
				t.Fatal("no record slab was used again: the test shows nothing")
			}
			seen := map[int]bool{}
			next := map[int]int64{}
			for _, m := range got {
				var i int
				if _, err := fmt.Sscanf(string(m.Key), "k-%d", &i); err != nil || i < 0 || i >= n {
					t.Fatalf("message at %d/%d: key %q", m.Partition, m.Offset, m.Key)
				}
				want := msgs[i]
				if string(m.Value) != string(want.Value) || len(m.Headers) != len(want.Headers) ||
					len(want.Headers) == 1 && (m.Headers[0].Key != "i" || string(m.Headers[0].Value) != string(want.Headers[0].Value)) {
					t.Fatalf("message %d at %d/%d: value %q headers %v, want %q %v", i, m.Partition, m.Offset, m.Value, m.Headers, want.Value, want.Headers)
				}
				if seen[i] || m.Offset != next[m.Partition] {
					t.Fatalf("message %d at %d/%d: seen before, or offset not the next (%d)", i, m.Partition, m.Offset, next[m.Partition])
				}
				seen[i] = true
				next[m.Partition] = m.Offset + 1
			}
		})
	}
}
