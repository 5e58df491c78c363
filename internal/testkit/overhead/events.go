package overhead

import (
	"testing"
	"time"

	"github.com/azkafka/azkafka/metrics"
)

// Events measures the Recorders p gives a Writer and a Reader, without a
// broker: request=produce, what a Writer reports for one produce request
// of 100 messages in 6 batches (Requested, 6 Produced); request=fetch-batch,
// what a Reader reports for one fetched batch of 100 messages handed out by
// one poll (Fetched, Consumed). Divide by 100 for the cost per message.
func Events(b *testing.B, p metrics.Provider) {
	w := p.Recorder(metrics.Client{Kind: metrics.KindWriter, UserID: "w", AZ: "az-a"})
	r := p.Recorder(metrics.Client{Kind: metrics.KindReader, UserID: "r", AZ: "az-a"})
	br := metrics.Broker{NodeID: 1, Addr: "127.0.0.1:9092", Rack: "az-a", InZone: true}
	b.Run("request=produce", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Requested(br, 0, 11_000, 300, 100*time.Microsecond, "")
			for p := range int32(6) {
				w.Produced(br, "t", p, 17, 2000, 2000)
			}
		}
	})
	b.Run("request=fetch-batch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Fetched(br, "t", 0, 100, 12_000, 12_000)
			r.Consumed("t", 0, 100, 10_000, 0)
		}
	})
}
