package sdk

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkReadMessageHandOut is ReadMessage's own cost per message, with
// records already taken from the engine (a group Reader with
// CommitInterval: hand out and mark).
func BenchmarkReadMessageHandOut(b *testing.B) {
	const n = 4096
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t", Partition: int32(i / 1024), Offset: int64(i), Key: []byte("key-000000001"),
			Value: make([]byte, 100), Timestamp: time.UnixMilli(1700000000000 + int64(i))}
	}
	r := &Reader{group: true, config: kafka.ReaderConfig{GroupID: "g", CommitInterval: time.Second},
		marks: map[string]map[int32]kgo.EpochOffset{}}
	r.hooks = &engineHooks{}
	sts := make([]partState, 4)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if r.q.empty() {
			b.StopTimer()
			for j := range sts {
				r.q.push(recs[j*1024:(j+1)*1024], n, &sts[j])
			}
			b.StartTimer()
		}
		m, err := r.ReadMessage(ctx)
		if err != nil || m.Offset < 0 {
			b.Fatal(err)
		}
	}
}
