package sdk_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/internal/testkit/metricstest"
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

// describedProducer answers a DescribeProducers request as Kafka does for
// an idempotent producer (the embedded broker lists only transactional
// ones): the producer with its epoch and last sequence number on every
// partition asked for.
func describedProducer(t *testing.T, req kproxy.Request, resp []byte, pid int64, epoch int16, last int32) []byte {
	r, err := kproxy.DecodeResponse(req, resp)
	if err != nil {
		t.Errorf("decoding DescribeProducers: %v", err)
		return resp
	}
	dr := r.(*kmsg.DescribeProducersResponse)
	for i := range dr.Topics {
		for j := range dr.Topics[i].Partitions {
			ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
			ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pid, int32(epoch), last
			dr.Topics[i].Partitions[j].ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{ap}
		}
	}
	return kproxy.EncodeResponse(req, dr)
}

// TestIdempotentResendStoredAfterRestart: a batch the broker stored whose
// answer was lost, resent and answered OUT_OF_ORDER_SEQUENCE_NUMBER — what
// a restarted Kafka broker answers for every resent batch but the
// producer's last, since its producer state after a restart keeps only
// that one — is counted delivered, once: the Writer asks the leader how
// far the producer's sequence got instead of storing the batch again under
// a new epoch.
func TestIdempotentResendStoredAfterRestart(t *testing.T) {
	t.Parallel()
	rig := newFaultRig(t, "restarted", 1)
	p := metricstest.New()
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		RequiredAcks: kafka.RequireAll,
	}, testOptions(t, sdk.WithIdempotence(true), sdk.WithMetrics(p))...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := deliverytest.Messages("before", 10)
	if err := w.WriteMessages(ctx, first...); err != nil {
		t.Fatal(err)
	}
	before := w.Stats().SDK

	// The next Produce reaches the broker and loses its answer; its
	// resend is answered as a restarted broker would.
	var cut, rewritten atomic.Int64
	rig.proxy.OnRequest(func(req kproxy.Request) kproxy.Action {
		if req.Key == int16(kmsg.Produce) && cut.CompareAndSwap(0, 1) {
			return kproxy.CloseAfter
		}
		return kproxy.Forward
	})
	rig.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key == int16(kmsg.DescribeProducers) {
			return describedProducer(t, req, resp, before.ProducerID, before.ProducerEpoch, 19)
		}
		if req.Key != int16(kmsg.Produce) || cut.Load() == 0 || !rewritten.CompareAndSwap(0, 1) {
			return resp
		}
		r, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			t.Errorf("decoding the resend's answer: %v", err)
			return resp
		}
		pr := r.(*kmsg.ProduceResponse)
		for i := range pr.Topics {
			for j := range pr.Topics[i].Partitions {
				p := &pr.Topics[i].Partitions[j]
				p.ErrorCode, p.BaseOffset = kerr.OutOfOrderSequenceNumber.Code, -1
			}
		}
		return kproxy.EncodeResponse(req, pr)
	})
	second := deliverytest.Messages("after", 10)
	if err := w.WriteMessages(ctx, second...); err != nil {
		t.Fatalf("the resent call: %v", err)
	}
	if cut.Load() != 1 || rewritten.Load() != 1 {
		t.Fatalf("the fault did not happen: %d answers lost, %d rewritten", cut.Load(), rewritten.Load())
	}
	st := w.Stats().SDK
	if st.ResentStored != 1 {
		t.Errorf("Stats().SDK.ResentStored = %d, want 1", st.ResentStored)
	}
	if n := p.Only(t).Count("resent stored"); n != 1 {
		t.Errorf("Resent(ResendStored) reported %d times, want 1", n)
	}
	if st.ProducerID != before.ProducerID || st.ProducerEpoch != before.ProducerEpoch {
		t.Errorf("producer moved from %d/%d to %d/%d: the batch was renumbered", before.ProducerID, before.ProducerEpoch, st.ProducerID, st.ProducerEpoch)
	}
	lost, dups := deliverytest.LostAndDuplicated(append(first, second...), rig.consumeAll(t))
	if lost != 0 || dups != 0 {
		t.Fatalf("%d lost, %d duplicated", lost, dups)
	}
}

// TestAsyncBatchSizeSendsBeforeBatchTimeout: in async mode BatchSize
// messages waiting on a partition are sent without waiting for
// BatchTimeout, as kafka-go sends a full batch; here BatchTimeout is a
// minute (the engine's longest linger) and the call's Completion comes
// well inside the test's 30 s, at every acks level.
func TestAsyncBatchSizeSendsBeforeBatchTimeout(t *testing.T) {
	t.Parallel()
	for _, acks := range []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireOne} {
		t.Run(fmt.Sprint(acks), func(t *testing.T) {
			rig := newFaultRig(t, "full", 2)
			done := make(chan []kafka.Message, 4)
			w, err := sdk.NewWriter(&kafka.Writer{
				Addr:         kafka.TCP(rig.proxy.Addr()),
				Topic:        rig.topic,
				RequiredAcks: acks,
				Balancer:     byKey,
				BatchSize:    10,
				BatchTimeout: time.Hour,
				Async:        true,
				Completion: func(msgs []kafka.Message, err error) {
					if err != nil {
						t.Errorf("Completion: %v", err)
					}
					done <- msgs
				},
			}, testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			msgs := make([]kafka.Message, 10)
			for i := range msgs {
				msgs[i] = kafka.Message{Key: []byte("p1"), Value: []byte(fmt.Sprint(i))}
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-done:
				if len(got) != 10 || got[0].Partition != 1 {
					t.Fatalf("Completion got %d messages on partition %d", len(got), got[0].Partition)
				}
			case <-ctx.Done():
				t.Fatal("10 messages (BatchSize) waited for BatchTimeout")
			}
		})
	}
}
