package sdk_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// byKey sends a message keyed "p<N>" to partition N.
var byKey = kafka.BalancerFunc(func(m kafka.Message, parts ...int) int { return int(m.Key[1] - '0') })

// holdOnce returns a release function for a hold: closing it lets held
// responses go; it may be called more than once.
func holdOnce() (release chan struct{}, releaseFn func()) {
	release = make(chan struct{})
	var once atomic.Bool
	return release, func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
	}
}

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

// TestIdempotentStuckPartitionDoesNotStallOthers: two partitions flushed
// together; the broker refuses partition 0's batch with a retried error,
// then its resend gets no answer until the test says. Partition 1's
// batch, acknowledged in the first answer, is reported meanwhile.
func TestIdempotentStuckPartitionDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "stuck", 2)
	release, releaseFn := holdOnce()
	var answers atomic.Int64
	rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key != keyProduce {
			return resp
		}
		if answers.Add(1) > 1 {
			<-release // partition 0's resend
			return resp
		}
		r, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			return resp
		}
		pr := r.(*kmsg.ProduceResponse)
		for i := range pr.Topics {
			for j := range pr.Topics[i].Partitions {
				if pr.Topics[i].Partitions[j].Partition == 0 {
					pr.Topics[i].Partitions[j].ErrorCode = int16(kafka.NotEnoughReplicas)
				}
			}
		}
		return kproxy.EncodeResponse(req, pr)
	})
	type outcome struct {
		partition int
		err       error
	}
	done := make(chan outcome, 2)
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     byKey,
		BatchTimeout: time.Millisecond,
		WriteTimeout: 30 * time.Second, // the held resend does not time out
		Async:        true,
		Completion: func(msgs []kafka.Message, err error) {
			done <- outcome{msgs[0].Partition, err}
		},
	}, testOptions(t, sdk.WithIdempotence(true))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer releaseFn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("p0"), Value: []byte("zero")},
		kafka.Message{Key: []byte("p1"), Value: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.partition != 1 || o.err != nil {
			t.Fatalf("first report: partition %d, err %v; want partition 1 stored", o.partition, o.err)
		}
	case <-ctx.Done():
		t.Fatal("partition 1's batch was not reported within 10s while partition 0's resend was held")
	}
	releaseFn()
	select {
	case o := <-done:
		if o.partition != 0 || o.err != nil {
			t.Fatalf("second report: partition %d, err %v; want partition 0 stored", o.partition, o.err)
		}
	case <-ctx.Done():
		t.Fatal("partition 0's batch was not reported within 10s of its answer")
	}
	if got := rig.consumeAll(t); len(got) != 2 || got["zero"] != 1 || got["one"] != 1 {
		t.Fatalf("stored %v, want zero and one once", got)
	}
}

// TestIdempotentInitAttemptTimesOut: an InitProducerId that gets no
// answer costs one attempt of WriteTimeout, not the caller's deadline;
// the next attempt gets the producer ID and the write succeeds.
func TestIdempotentInitAttemptTimesOut(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "initsilent", 1)
	release, releaseFn := holdOnce()
	defer releaseFn()
	var inits atomic.Int64
	rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key == 22 && inits.Add(1) == 1 {
			<-release // the first answer never comes while the test runs
		}
		return resp
	})
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
		WriteTimeout: 100 * time.Millisecond,
	}, testOptions(t, sdk.WithIdempotence(true))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer releaseFn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("after")}); err != nil {
		t.Fatalf("WriteMessages: %v (InitProducerId answers asked for: %d)", err, inits.Load())
	}
	if n := inits.Load(); n < 2 {
		t.Fatalf("%d InitProducerId answers, want the silent one and a retry", n)
	}
	if got := rig.consumeAll(t); got["after"] != 1 {
		t.Fatalf("stored %v, want after once", got)
	}
}
