package sdk_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/kproxy"
	"github.com/azkafka/azkafka/sdk"
)

var churnMessages = flag.Int("churn.messages", 0,
	"messages in TestChurn (default 50000, 10000 with -short; the issue's full figure, 100000, runs in conformance)")

// churner kills proxied connections at random, about every 200 ms: it
// closes a random live connection, or arms a one-shot CloseAfter (the
// broker handles the request, the client never sees the answer) or Reset
// on the next request of any kind.
type churner struct {
	p      *kproxy.Proxy
	armed  atomic.Int32 // a kproxy.Action to apply once, or -1
	kills  atomic.Int64
	byKind [3]atomic.Int64
	stop   chan struct{}
	done   sync.WaitGroup
}

func startChurn(p *kproxy.Proxy, seed uint64) *churner {
	c := &churner{p: p, stop: make(chan struct{})}
	c.armed.Store(-1)
	p.OnRequest(func(kproxy.Request) kproxy.Action {
		if a := c.armed.Swap(-1); a >= 0 {
			c.kills.Add(1)
			return kproxy.Action(a)
		}
		return kproxy.Forward
	})
	rnd := rand.New(rand.NewPCG(seed, seed))
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for {
			select {
			case <-c.stop:
				return
			case <-time.After(time.Duration(100+rnd.IntN(200)) * time.Millisecond):
			}
			switch kind := rnd.IntN(3); kind {
			case 0:
				if conns := p.Conns(); len(conns) > 0 && p.CloseConn(conns[rnd.IntN(len(conns))].ID) {
					c.kills.Add(1)
					c.byKind[0].Add(1)
				}
			case 1:
				c.armed.Store(int32(kproxy.CloseAfter))
				c.byKind[1].Add(1)
			case 2:
				c.armed.Store(int32(kproxy.Reset))
				c.byKind[2].Add(1)
			}
		}
	}()
	return c
}

func (c *churner) Stop() {
	close(c.stop)
	c.done.Wait()
	c.p.OnRequest(nil)
}

// TestChurn produces messages with an sdk.Writer while a consumer-group
// sdk.Reader consumes and commits them, both through a proxy that kills
// connections at random about every 200 ms while messages are produced.
// Zero messages may be lost, on the broker or for the consumer, the caller
// may see no error, and the group's commits must reach the end of every
// partition. Duplicates are counted and logged (-v).
func TestChurn(t *testing.T) {
	t.Parallel()
	n := 50000
	if testing.Short() {
		n = 10000
	}
	if *churnMessages > 0 {
		n = *churnMessages
	}
	rig := newFaultRig(t, "churn", 3)
	runChurn(t, rig, n)
}

// churnOptions are testOptions with the default retry policy (10
// attempts, 100ms..1s): the quick test policy gives up within about a
// second, which a connection killed every 200 ms can outlast.
func churnOptions(t testing.TB) []sdk.Option {
	return testOptions(t, sdk.WithRetry(10, 100*time.Millisecond, time.Second))
}

func runChurn(t *testing.T, rig *faultRig, n int) {
	sent := payloads("churn", n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(rig.proxy.Addr()),
		Topic:        rig.topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    100,
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 5 * time.Second,
		ReadTimeout:  5 * time.Second,
	}, churnOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := groupTestConfig(rig, "churn-group")
	cfg.MaxBytes = 1 << 20
	r, err := sdk.NewReader(cfg, churnOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}

	churn := startChurn(rig.proxy, uint64(time.Now().UnixNano()))
	start := time.Now()

	// Consumer (see churnConsume). It gets 60 s after the producers
	// finish: if a message was lost it would otherwise wait for it until
	// the test's deadline.
	seen := make(map[string]int, n)
	consumerErr := make(chan error, 1)
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	ends := make(chan map[int]int64, 1)
	go func() { consumerErr <- churnConsume(consumerCtx, r, n, ends, seen) }()

	// Producer: 4 goroutines, 100 messages per call.
	const producers, perCall = 4, 100
	var writeErrs atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	for g := 0; g < producers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off := int(next.Add(perCall)) - perCall
				if off >= n {
					return
				}
				end := min(off+perCall, n)
				if err := w.WriteMessages(ctx, sent[off:end]...); err != nil {
					writeErrs.Add(1)
					t.Errorf("WriteMessages [%d:%d]: %v", off, end, err)
				}
				// Spread the writes over a few seconds, so that the
				// churn hits them many times.
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	produced := time.Since(start)
	// The churn stops with production. Kept on, it would fall on the
	// reader's two or three connections alone, and kafka-go's group join
	// (JoinGroup blocks for seconds on a real broker) can then be killed
	// every time: seen on Kafka 4.3.1, the group never rejoined.
	churn.Stop()
	if err := w.Close(); err != nil {
		t.Errorf("Writer.Close: %v", err)
	}
	wst := w.Stats()
	ends <- endOffsets(t, rig)
	consumerDeadline := time.AfterFunc(60*time.Second, stopConsumer)
	defer consumerDeadline.Stop()

	if err := <-consumerErr; err != nil {
		t.Errorf("consumer saw an error after %d of %d messages: %v", len(seen), n, err)
	}
	consumed := time.Since(start)
	rst := r.Stats()
	if err := r.Close(); err != nil {
		t.Errorf("Reader.Close: %v", err)
	}

	lostOnBroker, dupsOnBroker := lostAndDuplicated(sent, consumeAll(t, rig.readDialer(), rig.readAddr(), rig.topic, rig.parts))
	lostForConsumer, dupsForConsumer := lostAndDuplicated(sent, seen)
	t.Logf("churn: %d messages, produced in %v, consumed in %v; connections killed: %d (close %d, close-after armed %d, reset armed %d)",
		n, produced.Round(time.Millisecond), consumed.Round(time.Millisecond), churn.kills.Load(),
		churn.byKind[0].Load(), churn.byKind[1].Load(), churn.byKind[2].Load())
	t.Logf("churn: broker: lost %d, duplicates %d; consumer: lost %d, duplicates %d",
		lostOnBroker, dupsOnBroker, lostForConsumer, dupsForConsumer)
	t.Logf("churn: writer retries %d, resent %d, transient errors absorbed %d, connections %d; reader transient errors absorbed %d, connections %d",
		wst.SDK.Retries, wst.SDK.MessagesResent, wst.SDK.TransientErrors, wst.SDK.Conn.ConnectionsCreated,
		rst.SDK.TransientErrors, rst.SDK.Conn.ConnectionsCreated)

	if churn.kills.Load() == 0 {
		t.Fatal("no connection was killed: the test proves nothing")
	}
	if lostOnBroker != 0 || lostForConsumer != 0 {
		t.Errorf("lost messages: %d not on the broker, %d never consumed", lostOnBroker, lostForConsumer)
	}
	requireCommittedToEnd(t, rig, cfg.GroupID)
}

// churnConsume reads with r, counting values in seen and committing every
// 500 messages and whenever it is idle, until it has seen n distinct
// values, read every partition up to the end offsets that arrive on ends
// (sent once production is over) and committed all it read. Reading to the
// end matters: a commit retried into the next group generation can land
// after that generation started from the older committed offset, so the
// group re-delivers messages, and committing those again moves the offset
// back to them until the consumer has read past them once more.
func churnConsume(ctx context.Context, r *sdk.Reader, n int, ends <-chan map[int]int64, seen map[string]int) error {
	var pending []kafka.Message
	last := map[int]int64{}
	var end map[int]int64
	caughtUp := func() bool {
		if end == nil || len(seen) < n {
			return false
		}
		for p, e := range end {
			if e > 0 && last[p] != e-1 {
				return false
			}
		}
		return true
	}
	commit := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := r.CommitMessages(ctx, pending...)
		pending = pending[:0]
		return err
	}
	for {
		if end == nil {
			select {
			case end = <-ends:
			default:
			}
		}
		if caughtUp() && len(pending) == 0 {
			return nil
		}
		fetchCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		m, err := r.FetchMessage(fetchCtx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if err := commit(); err != nil { // idle: commit what was read
					return err
				}
				continue
			}
			return err
		}
		seen[string(m.Value)]++
		last[m.Partition] = m.Offset
		pending = append(pending, m)
		if len(pending) >= 500 || caughtUp() {
			if err := commit(); err != nil {
				return err
			}
		}
	}
}

// endOffsets returns the end offset of every partition, from the broker.
func endOffsets(t testing.TB, rig *faultRig) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(rig.readAddr()), Timeout: 5 * time.Second}
	var reqs []kafka.OffsetRequest
	for p := 0; p < rig.parts; p++ {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	res, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{rig.topic: reqs}})
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	end := map[int]int64{}
	for _, po := range res.Topics[rig.topic] {
		end[po.Partition] = po.LastOffset
	}
	return end
}
