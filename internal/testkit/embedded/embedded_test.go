package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/segmentio/kafka-go"
)

func TestProduceConsumeAcrossBrokers(t *testing.T) {
	for _, brokers := range []int{1, 3} {
		t.Run(fmt.Sprintf("brokers=%d", brokers), func(t *testing.T) {
			c := embedded.StartT(t, embedded.Brokers(brokers), embedded.Topic("seeded", 3))
			if got := len(c.Addrs()); got != brokers {
				t.Fatalf("Addrs() = %d addresses, want %d", got, brokers)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.CreateTopic(ctx, "created", 4); err != nil {
				t.Fatal(err)
			}
			if err := c.CreateTopic(ctx, "created", 4); err != nil {
				t.Fatalf("creating an existing topic again: %v", err)
			}
			for _, topic := range []string{"seeded", "created"} {
				w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: topic, BatchTimeout: time.Millisecond}
				msgs := make([]kafka.Message, 20)
				for i := range msgs {
					msgs[i] = kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}
				}
				if err := w.WriteMessages(ctx, msgs...); err != nil {
					t.Fatalf("%s: write: %v", topic, err)
				}
				w.Close()
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: topic, GroupID: "g-" + topic, MaxWait: 50 * time.Millisecond})
				seen := map[string]string{}
				for len(seen) < len(msgs) {
					m, err := r.ReadMessage(ctx)
					if err != nil {
						t.Fatalf("%s: read after %d messages: %v", topic, len(seen), err)
					}
					seen[string(m.Key)] = string(m.Value)
				}
				r.Close()
				for i := range msgs {
					if got, want := seen[fmt.Sprint(i)], fmt.Sprintf("v%d", i); got != want {
						t.Errorf("%s: key %d = %q, want %q", topic, i, got, want)
					}
				}
			}
		})
	}
}

func TestStartRejectsZeroBrokers(t *testing.T) {
	if _, err := embedded.Start(embedded.Brokers(0)); err == nil {
		t.Fatal("Start(Brokers(0)) succeeded, want error")
	}
}

func TestWaitReadyTimesOutOnDeadAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := embedded.WaitReady(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("WaitReady on a dead address returned nil")
	}
}
