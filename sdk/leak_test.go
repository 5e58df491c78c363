package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// TestWriterReaderCloseLeavesNoGoroutines runs a sync Writer, an async
// Writer and a consumer-group Reader through their life and requires that
// Close leaves no goroutine behind (the resend goroutines, the async
// bookkeeping, kafka-go's pools). It is not parallel, so that other tests'
// goroutines do not come and go meanwhile.
func TestWriterReaderCloseLeavesNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	c, err := embedded.Start(embedded.Topic("leak", 2))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, async := range []bool{false, true} {
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "leak",
			RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, Async: async}, testOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMessages(ctx, deliverytest.Messages("l", 10)...); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "leak", GroupID: "leak", MaxWait: 50 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second, StartOffset: kafka.FirstOffset}
	r, err := sdk.NewReader(cfg, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := r.ReadMessage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	goleak.VerifyNone(t, ignore)
}
