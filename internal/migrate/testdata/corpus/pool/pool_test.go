package pool_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/migrate/testdata/corpus/pool"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func TestPool(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("jobs", 4))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "jobs", RequiredAcks: kafka.RequireAll}
	var msgs []kafka.Message
	for i := 0; i < 40; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint(i))})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := pool.New(2, kafka.ReaderConfig{Brokers: c.Addrs(), GroupID: "workers", Topic: "jobs", MaxWait: 100 * time.Millisecond})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	p.Run(ctx, 40, func(m kafka.Message) { mu.Lock(); seen[string(m.Value)] = true; mu.Unlock() })
	if len(seen) != 40 {
		t.Fatalf("read %d distinct of 40", len(seen))
	}
}
