package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

// holdProduce makes p hold the responses to produce requests while
// held is set, and counts the produce requests relayed; each held
// response signals on heldOne.
type holdProduce struct {
	requests atomic.Int64
	hold     atomic.Bool
	release  chan struct{}
	once     sync.Once
	heldOne  chan struct{}
}

// Release lets every held response go, and no more be held.
func (h *holdProduce) Release() {
	h.hold.Store(false)
	h.once.Do(func() { close(h.release) })
}

func newHoldProduce(p *kproxy.Proxy) *holdProduce {
	h := &holdProduce{release: make(chan struct{}), heldOne: make(chan struct{}, 64)}
	p.OnRequest(func(r kproxy.Request) kproxy.Action {
		if r.Key == int16(kmsg.Produce) {
			h.requests.Add(1)
		}
		return kproxy.Forward
	})
	p.OnResponse(func(r kproxy.Request, resp []byte) []byte {
		if r.Key == int16(kmsg.Produce) && h.hold.Load() {
			h.heldOne <- struct{}{}
			<-h.release
		}
		return resp
	})
	return h
}

// TestWriterGathersConcurrentCalls: while a lone call's produce request
// waits for its answer, 20 concurrent calls to the same broker start: the
// first to arrive goes out at once (nothing of the gather was in flight),
// the other 19 gather in the Writer instead of going out as requests of
// their own; once the answers come they all go, and every message is
// stored once, each caller's in its order.
func TestWriterGathersConcurrentCalls(t *testing.T) {
	for _, gather := range []bool{true, false} {
		t.Run(fmt.Sprintf("gather=%v", gather), func(t *testing.T) {
			rig := newFaultRig(t, "gather", 3)
			h := newHoldProduce(rig.proxy)
			sdk.SetGather(gather)
			w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic,
				RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}}, testOptions(t)...)
			sdk.SetGather(true)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			defer h.Release() // before Close, also when the test fails
			ctx := testCtx(t)
			// Warm: metadata, producer ID, every partition's leader.
			var warm []kafka.Message
			for p := range 3 {
				warm = append(warm, kafka.Message{Key: fmt.Appendf(nil, "warm-%d", p), Value: []byte("w")})
			}
			if err := w.WriteMessages(ctx, warm...); err != nil {
				t.Fatal(err)
			}
			h.hold.Store(true)
			const callers, perCaller = 20, 3
			var wg sync.WaitGroup
			errs := make(chan error, callers+1)
			write := func(m ...kafka.Message) {
				defer wg.Done()
				if err := w.WriteMessages(ctx, m...); err != nil {
					errs <- err
				}
			}
			wg.Add(1)
			go write(kafka.Message{Key: []byte("first"), Value: []byte("first")})
			select {
			case <-h.heldOne:
			case <-ctx.Done():
				t.Fatal("the first call's produce request never came")
			}
			before := h.requests.Load()
			var order [callers][]string
			for g := range callers {
				for i := range perCaller {
					order[g] = append(order[g], fmt.Sprintf("c%d-%d", g, i))
				}
			}
			// Each caller's messages in sequence, one per call: the
			// first waits in the Writer (gathered) or flies.
			var seq sync.WaitGroup
			for g := range callers {
				seq.Add(1)
				go func() {
					defer seq.Done()
					for _, v := range order[g] {
						wg.Add(1)
						write(kafka.Message{Key: fmt.Appendf(nil, "k%d", g), Value: []byte(v)})
					}
				}()
			}
			if gather {
				// One caller's first message goes out (its response
				// queues behind the held one on the connection); wait
				// until every other caller's first message waits in the
				// Writer, none of them sent.
				for h.requests.Load() == before {
					if ctx.Err() != nil {
						t.Fatal("no call of the 20 went out while the lone call's request was in flight")
					}
					time.Sleep(time.Millisecond)
				}
				for sdk.GatherWaiting(w) < callers-1 {
					if ctx.Err() != nil {
						t.Fatalf("%d of %d calls gathered", sdk.GatherWaiting(w), callers-1)
					}
					time.Sleep(time.Millisecond)
				}
				if got := h.requests.Load() - before; got != 1 {
					t.Fatalf("%d produce requests went out while the first was in flight; want 1, the other calls gathered", got)
				}
			} else {
				// The control: the engine alone pipelines the calls as
				// requests of their own (recorded, not asserted).
				time.Sleep(50 * time.Millisecond)
				t.Logf("without gathering: %d more produce requests while one was in flight", h.requests.Load()-before)
			}
			h.Release()
			seq.Wait()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("produce requests for %d calls after the first: %d", callers*perCaller, h.requests.Load()-before)
			// Every message stored once, each caller's in order.
			got := map[string][]string{}
			for _, vs := range deliverytest.PartitionValues(ctx, t, rig.checkTopic()) {
				for _, v := range vs {
					var g, i int
					if _, err := fmt.Sscanf(v, "c%d-%d", &g, &i); err == nil {
						got[fmt.Sprint(g)] = append(got[fmt.Sprint(g)], v)
					}
				}
			}
			for g := range callers {
				if k := fmt.Sprint(g); !slices.Equal(got[k], order[g]) {
					t.Errorf("caller %d: stored %v, want %v", g, got[k], order[g])
				}
			}
		})
	}
}

// TestWriterHoldsForReturningCallers: four goroutines, each making calls
// of four messages to a partition of its own one after another, every
// produce answer 20 ms late. Each wave's callers come back one by one as
// their messages get their outcome; the Writer holds the next wave until
// all four are back, so that waves carry the four calls instead of
// alternating between the first caller back alone and the other three
// (two round trips a call). The hold is set long in the middle of the
// run, where the calls per wave are counted, so that only the callers'
// coming back ends it; the control without a hold is recorded.
// Every message is stored once, each caller's in order.
func TestWriterHoldsForReturningCallers(t *testing.T) {
	for _, hold := range []bool{true, false} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			const callers, calls, perCall = 4, 30, 4
			rig := newFaultRig(t, "hold", callers)
			rig.proxy.OnResponse(func(r kproxy.Request, resp []byte) []byte {
				if r.Key == int16(kmsg.Produce) {
					time.Sleep(20 * time.Millisecond)
				}
				return resp
			})
			if hold {
				sdk.SetGatherHold(10 * time.Second)
			} else {
				sdk.SetGatherHold(-1)
			}
			defer sdk.SetGatherHold(0)
			w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic,
				RequiredAcks: kafka.RequireAll, Balancer: byKey}, testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx := testCtx(t)
			var warm []kafka.Message
			for p := range callers {
				warm = append(warm, kafka.Message{Key: fmt.Appendf(nil, "p%d", p), Value: []byte("w")})
			}
			if err := w.WriteMessages(ctx, warm...); err != nil {
				t.Fatal(err)
			}
			var made atomic.Int64
			type snap struct{ waves, calls int }
			var from, to snap
			var fromOnce, toOnce sync.Once
			var wg sync.WaitGroup
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for c := range calls {
						msgs := make([]kafka.Message, perCall)
						for i := range msgs {
							msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "p%d", g), Value: fmt.Appendf(nil, "%d-%d", c, i)}
						}
						if err := w.WriteMessages(ctx, msgs...); err != nil {
							t.Error(err)
							return
						}
						// The middle of the run: past the first waves, before
						// any caller finishes. Then holds get short: a
						// caller that finishes never comes back, and the
						// others' last calls would wait out a long hold.
						switch made.Add(1) {
						case callers * calls / 4:
							fromOnce.Do(func() { from.waves, from.calls = sdk.GatherWaves(w) })
						case callers * calls * 3 / 4:
							toOnce.Do(func() {
								to.waves, to.calls = sdk.GatherWaves(w)
								if hold {
									sdk.SetGatherHold(time.Millisecond)
								}
							})
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			perWave := float64(to.calls-from.calls) / float64(to.waves-from.waves)
			t.Logf("calls per wave in the middle of the run: %.2f (%d calls, %d waves)", perWave, to.calls-from.calls, to.waves-from.waves)
			if hold && perWave < callers-0.5 {
				t.Errorf("%.2f calls per wave with the hold; want about %d, every caller in each", perWave, callers)
			}
			wantStored(ctx, t, rig.checkTopic(), func(p int) (want []string) {
				if p < callers {
					want = append(want, "w")
					for c := range calls {
						for i := range perCall {
							want = append(want, fmt.Sprintf("%d-%d", c, i))
						}
					}
				}
				return want
			})
		})
	}
}

// TestWriterHoldsThroughChangingRoundTrips: two goroutines make calls of
// one message to a partition each, one after another, one of them
// pausing 700 µs between calls, while every other produce answer comes
// 20 ms late: holds begin after slow waves and fast ones, and a hold's
// checks go on after a later hold began (under -race, a check that read
// the lane without its lock was reported here). Every message is stored
// once, each caller's in order.
func TestWriterHoldsThroughChangingRoundTrips(t *testing.T) {
	const callers, calls = 2, 60
	rig := newFaultRig(t, "hold-rtt", callers)
	var answers atomic.Int64
	rig.proxy.OnResponse(func(r kproxy.Request, resp []byte) []byte {
		if r.Key == int16(kmsg.Produce) && answers.Add(1)%2 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		return resp
	})
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic,
		RequiredAcks: kafka.RequireAll, Balancer: byKey}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "p%d", g), Value: fmt.Append(nil, c)}); err != nil {
					t.Error(err)
					return
				}
				if g == 1 {
					time.Sleep(700 * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}
	wantStored(ctx, t, rig.checkTopic(), func(p int) (want []string) {
		if p < callers {
			for c := range calls {
				want = append(want, fmt.Sprint(c))
			}
		}
		return want
	})
}

// wantStored checks that each partition of topic stored want(p), in
// order.
func wantStored(ctx context.Context, t *testing.T, topic deliverytest.Topic, want func(p int) []string) {
	t.Helper()
	for p, vs := range deliverytest.PartitionValues(ctx, t, topic) {
		if w := want(p); !slices.Equal(vs, w) {
			t.Errorf("partition %d: stored %d messages %v..., want %d in order", p, len(vs), vs[:min(len(vs), 6)], len(w))
		}
	}
}

// TestWriterCloseEndsHold: two goroutines make calls of one message to a
// partition each, one after another, with a hold that only the callers'
// coming back ends. One goroutine stops; the other's next call waits in
// a hold for it. Close sends the held message at once: the call returns
// nil, Close returns, and every message is stored once, in order.
func TestWriterCloseEndsHold(t *testing.T) {
	rig := newFaultRig(t, "hold-close", 2)
	rig.proxy.OnResponse(func(r kproxy.Request, resp []byte) []byte {
		if r.Key == int16(kmsg.Produce) {
			time.Sleep(5 * time.Millisecond)
		}
		return resp
	})
	sdk.SetGatherHold(time.Hour)
	defer sdk.SetGatherHold(0)
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic,
		RequiredAcks: kafka.RequireAll, Balancer: byKey}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("p0"), Value: []byte("w")}, kafka.Message{Key: []byte("p1"), Value: []byte("w")}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var made [2]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	stopped := make(chan struct{}) // caller 0 returned
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g == 0 {
				defer close(stopped)
			}
			for c := 0; g == 1 || !stop.Load(); c++ {
				if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "p%d", g), Value: fmt.Appendf(nil, "%d", c)}); err != nil {
					if !errors.Is(err, io.ErrClosedPipe) {
						errs <- fmt.Errorf("caller %d, call %d: %w", g, c, err)
					}
					return
				}
				made[g].Add(1)
			}
		}()
	}
	// Both callers in the waves; then caller 0 stops, and caller 1's
	// call waits in a hold for it.
	for made[0].Load() < 10 || made[1].Load() < 10 {
		if ctx.Err() != nil {
			t.Fatal("the callers made no 10 calls each")
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	<-stopped
	for sdk.GatherHolding(w) != 1 || sdk.GatherWaiting(w) != 1 {
		if ctx.Err() != nil {
			t.Fatalf("no call held: %d lanes holding, %d records waiting", sdk.GatherHolding(w), sdk.GatherWaiting(w))
		}
		time.Sleep(time.Millisecond)
	}
	held := made[1].Load()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if made[1].Load() != held+1 {
		t.Fatalf("caller 1 made %d calls after its call was held; want the held one to return nil", made[1].Load()-held)
	}
	wantStored(ctx, t, rig.checkTopic(), func(p int) []string {
		want := []string{"w"}
		for c := range int(made[p].Load()) {
			want = append(want, fmt.Sprint(c))
		}
		return want
	})
}

// TestWriterSecondCloseWaitsForTheFirst: a program that closes its async
// Writer twice (a signal handler and a defer) and exits when a Close
// returns loses nothing: the second Close returns once the first has sent
// what was queued, as kafka-go's do.
func TestWriterSecondCloseWaitsForTheFirst(t *testing.T) {
	rig := newFaultRig(t, "close-twice", 1)
	h := newHoldProduce(rig.proxy)
	var sent, failed atomic.Int64
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, Async: true,
		BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				failed.Add(int64(len(msgs)))
				return
			}
			sent.Add(int64(len(msgs)))
		}}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	ctx := testCtx(t)
	h.hold.Store(true)
	written := int64(1)
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("held")}); err != nil {
		t.Fatal(err)
	}
	<-h.heldOne
	first := make(chan struct{})
	go func() {
		defer close(first)
		_ = w.Close()
	}()
	// The first Close is at work once calls are refused.
	for {
		err := w.WriteMessages(ctx, kafka.Message{Value: []byte("more")})
		if errors.Is(err, io.ErrClosedPipe) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		written++
	}
	time.AfterFunc(100*time.Millisecond, h.Release)
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// What matters to the program is that every message was sent when
	// the second Close returned (the held ones are answered 100ms after
	// the last call, so an early return shows here); the first Close then
	// returns too (it may still be on its way out).
	if sent.Load() != written || failed.Load() != 0 {
		t.Fatalf("when the second Close returned: %d of %d messages sent, %d failed", sent.Load(), written, failed.Load())
	}
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("the first Close never returned")
	}
}

// heldCompletionWriter is a synchronous Writer with Completion writing to
// rig's proxy, whose produce responses h holds while h.hold is set, after
// a first message written (metadata, producer ID).
func heldCompletionWriter(t *testing.T, rig *faultRig, completion func([]kafka.Message, error)) (*sdk.Writer, *holdProduce, context.Context) {
	t.Helper()
	h := newHoldProduce(rig.proxy)
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: kafka.RequireAll,
		Completion: completion}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	t.Cleanup(h.Release) // before Close
	ctx := testCtx(t)
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	return w, h, ctx
}

// TestWriterCompletionAfterTheCallReturned: a synchronous call whose ctx
// ends before the broker answers returns, and its caller reuses its
// slice; Completion later reports the messages the call wrote, as
// kafka-go's does, not what the slice holds by then.
func TestWriterCompletionAfterTheCallReturned(t *testing.T) {
	reported := make(chan []kafka.Message, 4)
	w, h, ctx := heldCompletionWriter(t, newFaultRig(t, "completion-reuse", 1), func(msgs []kafka.Message, err error) {
		if err == nil {
			reported <- slices.Clone(msgs)
		}
	})
	<-reported
	h.hold.Store(true)
	msgs := []kafka.Message{{Key: []byte("k1"), Value: []byte("original-1")}, {Key: []byte("k2"), Value: []byte("original-2")}}
	callCtx, cancel := context.WithCancel(ctx)
	returned := make(chan error, 1)
	go func() { returned <- w.WriteMessages(callCtx, msgs...) }()
	<-h.heldOne
	cancel()
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call returned %v, want context.Canceled", err)
	}
	msgs[0] = kafka.Message{Key: []byte("n1"), Value: []byte("next-1")}
	msgs[1].Value = []byte("next-2")
	h.Release()
	var got []string
	for len(got) < 2 {
		select {
		case ms := <-reported:
			for _, m := range ms {
				got = append(got, string(m.Key)+"="+string(m.Value))
			}
		case <-ctx.Done():
			t.Fatalf("Completion reported %v, then nothing", got)
		}
	}
	if want := []string{"k1=original-1", "k2=original-2"}; !slices.Equal(got, want) {
		t.Fatalf("Completion reported %v, want %v", got, want)
	}
}

// valuesMessages is n messages whose values are their indexes.
func valuesMessages(n int) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i].Value = fmt.Appendf(nil, "%d", i)
	}
	return msgs
}

// TestWriterLargeCallEndsWithItsCtx: a call of more messages than the
// engine buffers, to a broker that does not answer, returns when its ctx
// ends (not after the delivery budget): the messages handed over are
// stored once the broker answers, the others fail with ctx's error, and
// none is stored twice.
func TestWriterLargeCallEndsWithItsCtx(t *testing.T) {
	const n = 60_000
	var failed, sent atomic.Int64
	all := make(chan struct{}) // every message of the call has its outcome
	rig := newFaultRig(t, "large-call", 2)
	w, h, ctx := heldCompletionWriter(t, rig, func(msgs []kafka.Message, err error) {
		switch {
		case err == nil:
			sent.Add(int64(len(msgs)))
		case errors.Is(err, context.Canceled):
			failed.Add(int64(len(msgs)))
		default:
			t.Errorf("Completion: %d messages failed with %v", len(msgs), err)
		}
		if sent.Load()+failed.Load() == n+1 {
			close(all)
		}
	})
	h.hold.Store(true)
	msgs := valuesMessages(n)
	callCtx, cancel := context.WithCancel(ctx)
	returned := make(chan error, 1)
	go func() { returned <- w.WriteMessages(callCtx, msgs...) }()
	<-h.heldOne
	cancel()
	wantCanceled(ctx, t, returned, "the call")
	h.Release()
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatalf("%d acknowledged and %d failed of %d, then nothing", sent.Load(), failed.Load(), n+1)
	}
	stored := int64(0)
	for _, end := range deliverytest.EndOffsets(ctx, t, deliverytest.Topic{Addrs: rig.broker.Addrs(), Name: rig.topic, Partitions: rig.parts}) {
		stored += end
	}
	if failed.Load() == 0 || sent.Load() <= 1 || stored != sent.Load() {
		t.Fatalf("%d messages and a first: %d acknowledged, %d failed with ctx's error, %d stored", n, sent.Load(), failed.Load(), stored)
	}
}

// TestWriterCloseEndsATopicLookUp: a call to a topic the Writer has not
// written yet looks it up; when the cluster stopped answering, Close ends
// that call (io.ErrClosedPipe), as it ends a call waiting for its
// messages, instead of leaving it to its ctx.
func TestWriterCloseEndsATopicLookUp(t *testing.T) {
	rig := newFaultRig(t, "lookup-close", 1)
	if err := rig.broker.CreateTopic(context.Background(), "lookup-close-2", 1); err != nil {
		t.Fatal(err)
	}
	var dead atomic.Bool
	lookingUp := make(chan struct{}, 1)
	rig.proxy.OnRequest(func(r kproxy.Request) kproxy.Action {
		if !dead.Load() {
			return kproxy.Forward
		}
		if r.Key == int16(kmsg.Metadata) {
			select {
			case lookingUp <- struct{}{}:
			default:
			}
		}
		return kproxy.CloseBefore
	})
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), RequiredAcks: kafka.RequireAll}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := w.WriteMessages(ctx, kafka.Message{Topic: rig.topic, Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	dead.Store(true)
	returned := make(chan error, 1)
	go func() {
		returned <- w.WriteMessages(context.Background(), kafka.Message{Topic: "lookup-close-2", Value: []byte("second")})
	}()
	<-lookingUp
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-returned:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("the call returned %v, want io.ErrClosedPipe", err)
		}
	case <-ctx.Done():
		t.Fatal("the call looking its topic up did not return after Close")
	}
}

// TestWriterLargeCallFindingNoRoom: a call of more messages than the
// engine buffers, made while another fills the buffer at a broker that
// does not answer, hands none over; when its ctx ends it returns ctx's
// error, as a smaller call finding no room does (its messages' errors,
// each wrapping ctx's, in a kafka.WriteErrors, which errors.Is does not
// see through, before).
func TestWriterLargeCallFindingNoRoom(t *testing.T) {
	const n = 60_000
	w, h, ctx := heldCompletionWriter(t, newFaultRig(t, "large-no-room", 1), func([]kafka.Message, error) {})
	h.hold.Store(true)
	msgs := valuesMessages(n)
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	go func() { _ = w.WriteMessages(first, msgs...) }()
	<-h.heldOne
	for sdk.BufferedRecords(w) < 50_000 { // the first call filled the buffer
		if ctx.Err() != nil {
			t.Fatalf("the engine buffers %d records, want 50,000", sdk.BufferedRecords(w))
		}
		time.Sleep(time.Millisecond)
	}
	second, cancel := context.WithCancel(ctx)
	returned := make(chan error, 1)
	go func() { returned <- w.WriteMessages(second, msgs...) }()
	time.Sleep(50 * time.Millisecond) // the second call waiting for room (or not yet: ctx's error either way)
	cancel()
	wantCanceled(ctx, t, returned, "the call")
	// So does a call of one message (the Writer's own count of records
	// without their outcome, which spares it the engine's, sees no room
	// either).
	small, cancelSmall := context.WithCancel(ctx)
	go func() { returned <- w.WriteMessages(small, kafka.Message{Value: []byte("small")}) }()
	time.Sleep(50 * time.Millisecond)
	cancelSmall()
	wantCanceled(ctx, t, returned, "the call of one message")
	// Once every record has its outcome, the count is back to 0.
	h.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := sdk.UnsettledRecords(w); n != 0 {
		t.Fatalf("the Writer counts %d records without their outcome after Close, want 0", n)
	}
}

// wantCanceled waits for a call to return on returned, which must be its
// canceled ctx's error; what names the call.
func wantCanceled(ctx context.Context, t *testing.T, returned <-chan error, what string) {
	t.Helper()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s returned %.200v, want context.Canceled", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s did not return when its ctx ended", what)
	}
}

// TestWriterLargeCallComesAfterWaitingRecords: a call whose ctx ended
// while its message waited in a lane (a wave in flight to the broker)
// leaves the message to be written; the caller's next call, larger than
// the engine's buffer, does not pass the lanes, and its messages are
// stored after the waiting one, as calls of one caller are.
func TestWriterLargeCallComesAfterWaitingRecords(t *testing.T) {
	const n = 50_001
	rig := newFaultRig(t, "large-after-lane", 1)
	h := newHoldProduce(rig.proxy)
	t.Cleanup(h.Release)
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(rig.proxy.Addr()), Topic: rig.topic, RequiredAcks: kafka.RequireAll}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	ctx := testCtx(t)
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	// Two calls in flight (the second goes through the lane, as its wave),
	// and a third waiting in the lane behind them.
	h.hold.Store(true)
	returned := make(chan error, 3)
	go func() { returned <- w.WriteMessages(ctx, kafka.Message{Value: []byte("a")}) }()
	<-h.heldOne
	go func() { returned <- w.WriteMessages(ctx, kafka.Message{Value: []byte("b")}) }()
	for {
		if waves, _ := sdk.GatherWaves(w); waves == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the second call did not go out as a wave")
		}
		time.Sleep(time.Millisecond)
	}
	waiting, cancel := context.WithCancel(ctx)
	go func() { returned <- w.WriteMessages(waiting, kafka.Message{Value: []byte("c")}) }()
	for sdk.GatherWaiting(w) != 1 {
		if ctx.Err() != nil {
			t.Fatal("the third call did not wait in the lane")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wantCanceled(ctx, t, returned, "the waiting call")
	large := valuesMessages(n)
	go func() { returned <- w.WriteMessages(ctx, large...) }()
	for sdk.BufferedRecords(w) < 50_000 {
		if ctx.Err() != nil {
			t.Fatalf("the engine buffers %d records, want 50,000", sdk.BufferedRecords(w))
		}
		time.Sleep(time.Millisecond)
	}
	h.Release()
	for range 3 {
		if err := <-returned; err != nil {
			t.Fatal(err)
		}
	}
	wantStored(ctx, t, rig.checkTopic(), func(int) []string {
		want := []string{"warm", "a", "b", "c"}
		for _, m := range large {
			want = append(want, string(m.Value))
		}
		return want
	})
}
