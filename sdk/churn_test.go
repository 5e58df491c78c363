package sdk_test

import (
	"context"
	"flag"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/sdk"
)

var churnMessages = flag.Int("churn.messages", 0,
	"messages in TestChurn (default 50000, 10000 with -short; the issue's full figure, 100000, runs in conformance)")

// TestChurn produces messages with an sdk.Writer while a consumer-group
// sdk.Reader consumes and commits them, both through a proxy that kills
// connections at random about every 200 ms while messages are produced.
// Zero messages may be lost, on the broker or for the consumer, the caller
// may see no error, and the group's commits must reach the end of every
// partition. The Writer is idempotent (RequireAll): the broker must hold
// no duplicate, and each partition the messages of a call in the order of
// the call. The consumer's duplicates (redeliveries) are counted and
// logged (-v).
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

// perCall is the number of messages per WriteMessages call of the churn.
const perCall = 100

func runChurn(t *testing.T, rig *faultRig, n int) {
	sent := deliverytest.Messages("churn", n)
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

	churn := deliverytest.StartChurn(rig.proxy, uint64(time.Now().UnixNano()))
	start := time.Now()

	// Consumer (see deliverytest.ConsumeToEnd). It gets 60 s after the
	// producers finish: if a message was lost it would otherwise wait for
	// it until the test's deadline.
	seen := make(map[string]int, n)
	consumerErr := make(chan error, 1)
	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	ends := make(chan map[int]int64, 1)
	go func() { consumerErr <- deliverytest.ConsumeToEnd(consumerCtx, r, n, ends, seen) }()

	// Producer: 4 goroutines, perCall messages per call.
	const producers = 4
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
	ends <- rig.endOffsets(t)
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

	lostOnBroker, dupsOnBroker := deliverytest.LostAndDuplicated(sent, rig.consumeAll(t))
	lostForConsumer, dupsForConsumer := deliverytest.LostAndDuplicated(sent, seen)
	closed, closeAfters, resets := churn.ByKind()
	t.Logf("churn: %d messages, produced in %v, consumed in %v; connections killed: %d (close %d, close-after armed %d, reset armed %d)",
		n, produced.Round(time.Millisecond), consumed.Round(time.Millisecond), churn.Kills(), closed, closeAfters, resets)
	t.Logf("churn: broker: lost %d, duplicates %d; consumer: lost %d, duplicates %d",
		lostOnBroker, dupsOnBroker, lostForConsumer, dupsForConsumer)
	t.Logf("churn: writer retries %d, transient errors absorbed %d, connections %d; reader transient errors absorbed %d, connections %d",
		wst.SDK.Retries, wst.SDK.TransientErrors, wst.SDK.Conn.ConnectionsCreated,
		rst.SDK.TransientErrors, rst.SDK.Conn.ConnectionsCreated)

	if churn.Kills() == 0 {
		t.Fatal("no connection was killed: the test proves nothing")
	}
	if lostOnBroker != 0 || lostForConsumer != 0 {
		t.Errorf("lost messages: %d not on the broker, %d never consumed", lostOnBroker, lostForConsumer)
	}
	if dupsOnBroker != 0 {
		t.Errorf("%d duplicates on the broker from an idempotent Writer (retries %d, epoch bumps %d)",
			dupsOnBroker, wst.SDK.Retries, wst.SDK.EpochBumps)
	}
	// Calls were made concurrently; within one call (perCall messages
	// from a multiple of perCall) the order is the call's.
	requireOrder(t, rig.partitionValues(t), func(i int) int { return i / perCall })
	rig.requireCommittedToEnd(t, cfg.GroupID)
}
