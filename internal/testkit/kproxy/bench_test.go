package kproxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/segmentio/kafka-go"
)

// BenchmarkProduce writes batches of 100 1-KiB messages with a kafka.Conn,
// straight to the broker and through the proxy, to show the cost of
// relaying frame by frame:
//
//	go test -run XXX -bench Produce -benchmem ./internal/testkit/kproxy
func BenchmarkProduce(b *testing.B) {
	const topic = "bench"
	c := embedded.StartT(b, embedded.Topic(topic, 1))
	p, err := kproxy.Start(c.Addrs()[0])
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	msgs := make([]kafka.Message, 100)
	for i := range msgs {
		msgs[i].Value = make([]byte, 1024)
	}
	for _, tc := range []struct{ name, addr string }{{"direct", c.Addrs()[0]}, {"proxy", p.Addr()}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := kafka.DialLeader(ctx, "tcp", tc.addr, topic, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			b.SetBytes(int64(len(msgs) * 1024))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := conn.WriteMessages(msgs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
