package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

// TestIdempotentAsyncIdleSendsWithinBatchTimeout: one message handed to
// an idle async Writer, far below BatchSize, is sent once its
// BatchTimeout passes, not when some later message fills the batch.
func TestIdempotentAsyncIdleSendsWithinBatchTimeout(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "idle", 1)
	done := make(chan error, 1)
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, // BatchSize stays 100
		Async:        true,
		Completion: func(msgs []kafka.Message, err error) {
			done <- err
		},
	}, testOptions(t, sdk.WithIdempotence(true))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("alone")}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Completion: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the lone message was not sent within 10s: the idle Writer slept past BatchTimeout")
	}
	if got := rig.consumeAll(t); got["alone"] != 1 {
		t.Fatalf("stored %v, want alone once", got)
	}
}
