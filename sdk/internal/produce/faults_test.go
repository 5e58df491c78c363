package produce

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kproxy"
)

// answerProduce returns a response hook that sets every partition of the
// n-th Produce answer (counted from 1) to code; other answers pass.
func answerProduce(n int64, code kafka.Error) func(kproxy.Request, []byte) []byte {
	var seen atomic.Int64
	return func(req kproxy.Request, resp []byte) []byte {
		if req.Key != keyProduce || seen.Add(1) != n {
			return resp
		}
		r, err := kproxy.DecodeResponse(req, resp)
		if err != nil {
			return resp
		}
		pr := r.(*kmsg.ProduceResponse)
		for i := range pr.Topics {
			for j := range pr.Topics[i].Partitions {
				pr.Topics[i].Partitions[j].ErrorCode = int16(code)
			}
		}
		return kproxy.EncodeResponse(req, pr)
	}
}

// countProduces counts the Produce requests that reach the proxy.
func countProduces(r *rig, then func(n int64) kproxy.Action) *atomic.Int64 {
	var n atomic.Int64
	r.proxy.OnRequest(func(q kproxy.Request) kproxy.Action {
		if q.Key != keyProduce {
			return kproxy.Forward
		}
		k := n.Add(1)
		if then != nil {
			return then(k)
		}
		return kproxy.Forward
	})
	return &n
}

// An attempt that got no answer within its time is resent, however its
// end reached the producer (the attempt ctx's timer or the socket
// deadline kafka-go derives from it), and the batch is stored once.
func TestProduceAttemptTimeoutIsRetried(t *testing.T) {
	r := newRig(t, 1, 3)
	r.p.cfg.Timeout = 50 * time.Millisecond
	second := make(chan struct{})
	countProduces(r, func(n int64) kproxy.Action {
		if n == 2 {
			close(second)
		}
		return kproxy.Forward
	})
	var held atomic.Int64
	r.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key == keyProduce && held.Add(1) == 1 {
			// The first answer stays silent until the batch was sent
			// again: the first attempt can only end by its timeout.
			<-second
		}
		return resp
	})
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 3)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.p.Produce(ctx, []*Batch{a}); err != nil {
		t.Fatal(err)
	}
	// At least 2 attempts: the first can only end by its timeout. A loaded
	// machine can make the second time out too (50 ms); the batch is then
	// resent again, and stored once all the same.
	if a.Err != nil || a.Attempts < 2 {
		t.Fatalf("err %v after %d attempts, want stored after a timed-out first attempt", a.Err, a.Attempts)
	}
	wantStored(t, r.stored(t, 0), values("a", 3))
}

// A batch whose ctx is done before it is sent is never sent: it fails
// with the ctx's error, and not as ambiguous.
func TestProduceDoneCtxSendsNothing(t *testing.T) {
	r := newRig(t, 1, 3)
	ctx := context.Background()
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 1)}
	if err := r.p.Produce(ctx, []*Batch{a}); err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	n := countProduces(r, nil)
	done, cancel := context.WithCancel(ctx)
	cancel()
	b := &Batch{Topic: "t", Partition: 0, Messages: values("b", 1)}
	if err := r.p.Produce(done, []*Batch{b}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.Err, context.Canceled) || b.Ambiguous || b.Attempts != 0 {
		t.Fatalf("err %v, ambiguous %v, %d attempts; want context.Canceled, not ambiguous, 0 attempts", b.Err, b.Ambiguous, b.Attempts)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("%d Produce requests sent after the ctx ended", got)
	}
	wantStored(t, r.stored(t, 0), values("a", 1))
}

// A batch whose first attempt's outcome is unknown is never resent under
// a new epoch when the broker then answers OUT_OF_ORDER_SEQUENCE_NUMBER:
// it may be stored, so it fails as ambiguous and the partition moves on.
func TestProduceUnknownOutcomeNeverResentUnderNewEpoch(t *testing.T) {
	r := newRig(t, 1, 5)
	n := countProduces(r, func(n int64) kproxy.Action {
		if n == 1 {
			return kproxy.CloseAfter // stored, the answer lost
		}
		return kproxy.Forward
	})
	r.proxy.OnResponse(answerProduce(1, kafka.OutOfOrderSequenceNumber)) // the first answer seen is attempt 2's
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 2)}
	if err := r.p.Produce(context.Background(), []*Batch{a}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.Err, kafka.OutOfOrderSequenceNumber) || !a.Ambiguous || a.Attempts != 2 || n.Load() != 2 {
		t.Fatalf("err %v, ambiguous %v, %d attempts, %d requests; want OutOfOrderSequenceNumber, ambiguous, 2 and 2",
			a.Err, a.Ambiguous, a.Attempts, n.Load())
	}
	if !r.p.partition("t", 0).reset {
		t.Fatal("partition not marked for a new epoch")
	}
	wantStored(t, r.stored(t, 0), values("a", 2))
}

// A batch the broker refuses whole (MESSAGE_TOO_LARGE) was not stored: it
// fails without being ambiguous, and the partition keeps its epoch.
func TestProduceRefusedBatchIsNotAmbiguous(t *testing.T) {
	r := newRig(t, 1, 3)
	r.proxy.OnResponse(answerProduce(1, kafka.MessageSizeTooLarge))
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 1)}
	if err := r.p.Produce(context.Background(), []*Batch{a}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.Err, kafka.MessageSizeTooLarge) || a.Ambiguous || a.Attempts != 1 {
		t.Fatalf("err %v, ambiguous %v, %d attempts; want MessageSizeTooLarge, not ambiguous, 1", a.Err, a.Ambiguous, a.Attempts)
	}
	if r.p.partition("t", 0).reset {
		t.Fatal("partition marked for a new epoch after a batch that was not stored")
	}
	b := &Batch{Topic: "t", Partition: 0, Messages: values("b", 1)}
	if err := r.p.Produce(context.Background(), []*Batch{b}); err != nil || b.Err != nil {
		t.Fatal(err, b.Err)
	}
	if st := r.p.Stats(); st.EpochBumps != 0 {
		t.Fatalf("%d epoch bumps, want 0", st.EpochBumps)
	}
}

// While a new producer ID is being asked for, Stats answers: the request
// does not hold the producer's ID lock.
func TestProduceNewIDLeavesStatsFree(t *testing.T) {
	r := newRig(t, 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := &Batch{Topic: "t", Partition: 0, Messages: values("a", 1)}
	if err := r.p.Produce(ctx, []*Batch{a}); err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	var inits atomic.Int64
	r.proxy.OnResponse(func(req kproxy.Request, resp []byte) []byte {
		if req.Key == 22 && inits.Add(1) == 1 {
			close(held)
			<-release
		}
		return resp
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	r.p.idMu.Lock()
	r.p.fenced = true // as after INVALID_PRODUCER_EPOCH for the current epoch
	r.p.idMu.Unlock()
	r.p.partition("t", 0).reset = true
	b := &Batch{Topic: "t", Partition: 0, Messages: values("b", 1)}
	res := make(chan error, 1)
	go func() { res <- r.p.Produce(ctx, []*Batch{b}) }()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("no InitProducerId for the new ID")
	}
	stats := make(chan Stats, 1)
	go func() { stats <- r.p.Stats() }()
	select {
	case <-stats:
	case <-ctx.Done():
		t.Fatal("Stats blocked while InitProducerId was in flight")
	}
	close(release)
	if err := <-res; err != nil || b.Err != nil {
		t.Fatal(err, b.Err)
	}
	if st := r.p.Stats(); st.EpochBumps != 1 {
		t.Fatalf("%d epoch bumps, want 1 (the new ID)", st.EpochBumps)
	}
	wantStored(t, r.stored(t, 0), values("a", 1), values("b", 1))
}
