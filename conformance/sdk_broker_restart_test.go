//go:build conformance

package conformance

// The idempotent sdk.Writer through a broker killed with SIGKILL in the
// middle of production and restarted on the same log dir.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"

	"github.com/azkafka/azkafka/internal/testkit/kproxy"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// restartWriter is one sdk.Writer producing keyed messages numbered
// prefix-0000000, prefix-0000001, ... in calls of restartCall, one call
// after another, until stopped; it records which messages were
// acknowledged and which got an error.
type restartWriter struct {
	name  string
	w     *sdk.Writer
	async bool

	acked  atomic.Int64 // messages acknowledged so far
	handed atomic.Int64 // messages handed to WriteMessages so far

	mu      sync.Mutex
	ok      map[string]bool // value -> acknowledged (true) or failed (false)
	errs    []error         // the distinct errors seen, for the report
	retries int64           // Stats().SDK.Retries, summed (Stats reports deltas)
	bumps   int64
	stored  int64  // Stats().SDK.ResentStored, summed
	id      string // its client ID
}

const (
	restartCall     = 20   // messages per WriteMessages call
	restartInFlight = 2000 // async: messages handed over but not completed, at most
)

func (rw *restartWriter) record(msgs []kafka.Message, err error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	var werrs kafka.WriteErrors
	aligned := errors.As(err, &werrs) && len(werrs) == len(msgs)
	for i, m := range msgs {
		failed := err != nil
		if aligned {
			failed = werrs[i] != nil
		}
		rw.ok[string(m.Value)] = !failed
		if !failed {
			rw.acked.Add(1)
		}
	}
	if err != nil && len(rw.errs) < 5 {
		rw.errs = append(rw.errs, err)
	}
}

// pollStats adds the Writer's counters since the last call and returns the
// retries so far.
func (rw *restartWriter) pollStats() int64 {
	st := rw.w.Stats()
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.retries += st.SDK.Retries
	rw.bumps += st.SDK.EpochBumps
	rw.stored += st.SDK.ResentStored
	rw.id = st.SDK.ClientID
	return rw.retries
}

// run writes until stop is closed. Async mode keeps at most
// restartInFlight messages uncompleted: the caller's own flow control, as
// any async producer needs one.
func (rw *restartWriter) run(ctx context.Context, stop <-chan struct{}, slots chan struct{}) {
	for i := 0; ; i += restartCall {
		select {
		case <-stop:
			return
		default:
		}
		msgs := make([]kafka.Message, restartCall)
		for j := range msgs {
			v := fmt.Sprintf("%s-%07d", rw.name, i+j)
			msgs[j] = kafka.Message{Key: []byte(v), Value: []byte(v)}
		}
		if rw.async {
			for range msgs {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
		rw.handed.Add(int64(len(msgs)))
		err := rw.w.WriteMessages(ctx, msgs...)
		if !rw.async || err != nil {
			// Sync: the call's outcome. Async: an error here means nothing
			// was queued, and Completion will not run.
			rw.record(msgs, err)
			if rw.async {
				for range msgs {
					<-slots
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// responseHold catches, once armed, the first Produce response of each of
// n clients that the broker answered without error for every partition:
// onResponse marks it, onCut blocks its relay until release, then cuts it
// at byte 0 (the connection closes, the client never reads it).
type responseHold struct {
	n     int
	full  chan struct{} // closed when n responses are held
	freed chan struct{} // closed by release
	once  sync.Once

	mu      sync.Mutex
	armed   bool
	clients map[string]bool
	marked  map[[2]int64]bool   // conn ID, correlation ID
	held    map[string][2]int64 // client ID -> conn and correlation ID of its held response
	sent    map[uint64][]int32  // conn ID -> correlation IDs of its last Produce requests
	// behindOf is how many Produce requests of a client must be in flight
	// behind a response for it to be held (default 0).
	behindOf map[string]int
	cut      atomic.Int64 // held responses cut
}

func newResponseHold(n int) *responseHold {
	return &responseHold{n: n, full: make(chan struct{}), freed: make(chan struct{}),
		clients: map[string]bool{}, marked: map[[2]int64]bool{}, held: map[string][2]int64{}, sent: map[uint64][]int32{}, behindOf: map[string]int{}}
}

// onRequest notes the Produce requests of each connection: those sent
// after a held one are in flight behind it (the broker stores them and
// answers, the answers wait behind the held one, and the kill leaves their
// outcome unknown to the Writer).
func (h *responseHold) onRequest(req kproxy.Request) kproxy.Action {
	if req.Key == 0 {
		h.mu.Lock()
		sent := append(h.sent[req.ConnID], req.CorrelationID)
		h.sent[req.ConnID] = sent[max(len(sent)-16, 0):]
		h.mu.Unlock()
	}
	return kproxy.Forward
}

// inFlightBehind returns how many Produce requests of client are in
// flight behind its held response.
func (h *responseHold) inFlightBehind(client string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	held, ok := h.held[client]
	if !ok {
		return 0
	}
	return h.behindLocked(uint64(held[0]), int32(held[1]))
}

func (h *responseHold) behindLocked(conn uint64, corr int32) int {
	n := 0
	for _, c := range h.sent[conn] {
		if c > corr {
			n++
		}
	}
	return n
}

func (h *responseHold) arm() { h.mu.Lock(); h.armed = true; h.mu.Unlock() }

// needBehind makes the hold wait, for client, for a response with n
// Produce requests in flight behind it.
func (h *responseHold) needBehind(client string, n int) {
	h.mu.Lock()
	h.behindOf[client] = n
	h.mu.Unlock()
}

// release lets the held responses go (cut); safe to call more than once.
func (h *responseHold) release() { h.once.Do(func() { close(h.freed) }) }

func (h *responseHold) onResponse(req kproxy.Request, resp []byte) []byte {
	if req.Key != 0 { // Produce
		return resp
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed || h.clients[req.ClientID] || len(h.clients) == h.n ||
		h.behindLocked(req.ConnID, req.CorrelationID) < h.behindOf[req.ClientID] {
		return resp
	}
	r, err := kproxy.DecodeResponse(req, resp)
	pr, ok := r.(*kmsg.ProduceResponse)
	if err != nil || !ok {
		return resp
	}
	for _, tp := range pr.Topics {
		for _, pp := range tp.Partitions {
			if pp.ErrorCode != 0 {
				return resp
			}
		}
	}
	h.clients[req.ClientID] = true
	h.held[req.ClientID] = [2]int64{int64(req.ConnID), int64(req.CorrelationID)}
	h.marked[[2]int64{int64(req.ConnID), int64(req.CorrelationID)}] = true
	if len(h.clients) == h.n {
		close(h.full)
	}
	return resp
}

func (h *responseHold) onCut(req kproxy.Request, _ int) int {
	h.mu.Lock()
	held := h.marked[[2]int64{int64(req.ConnID), int64(req.CorrelationID)}]
	h.mu.Unlock()
	if !held {
		return -1
	}
	<-h.freed
	h.cut.Add(1)
	return 0
}

type restartFigures struct {
	acked, failed, failedStored, stored, lost, dups, reordered, unknown int
	retries, bumps, resentStored                                        int64
}

// restartBrokerConfig is added to the dedicated broker's config. A broker
// restarted after SIGKILL registers again with the controller, which
// refuses a new incarnation while the killed one's heartbeat session
// still runs (broker.session.timeout.ms, 9 s by default); shorter
// heartbeats and session let the restart through sooner.
var restartBrokerConfig = []string{
	"broker.heartbeat.interval.ms=500",
	"broker.session.timeout.ms=2000",
}

// TestSDKIdempotentBrokerRestart: a sync and an async idempotent Writer
// produce keyed, numbered messages to 6 partitions of a dedicated broker,
// which is killed with SIGKILL mid-production, while one answered Produce
// response of each Writer is held back (and then dropped), and restarted
// on the same log dir and ports once both Writers are retrying. The
// Writers carry on by themselves; read back, every partition holds each
// acknowledged message once, no message twice, and each Writer's messages
// in the order they were handed over. No flush setting is needed: SIGKILL
// ends the process, and the page cache keeps what the broker wrote.
func TestSDKIdempotentBrokerRestart(t *testing.T) {
	inLane(t, &brokerLane)
	t0 := time.Now()
	b := startDedicatedBroker(t, restartBrokerConfig...)
	t.Logf("dedicated broker answered Metadata %v after its first start", time.Since(t0).Round(time.Millisecond))
	// The Writers reach the broker through a proxy, which holds one
	// answered Produce response of each Writer while the broker is killed
	// and then drops it: batches the broker stored before the kill whose
	// acknowledgement never arrived.
	p, err := kproxy.Start(b.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	hold := newResponseHold(2)
	p.OnResponse(hold.onResponse)
	p.OnResponseCut(hold.onCut)
	p.OnRequest(hold.onRequest)
	t.Cleanup(hold.release) // before p.Close, if the test ends early
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const parts = 6
	topic := fmt.Sprintf("azkafka-sdk-restart-%d", time.Now().UnixNano())
	createTopic(t, ctx, b.Addrs(), topic, parts)

	// The default delivery budget (110 s) outlasts the restart (a JVM
	// start plus log recovery, 5-30 s on a shared 2-core machine). The
	// re-dial backoff is kept short so that the Writers find the broker
	// soon after it is back.
	opts := []sdk.Option{
		sdk.WithAZ("az-a"),
		sdk.WithConnLimiter(rate.NewLimiter(500, 100)),
		sdk.WithRedialBackoff(retry.Backoff{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}),
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
		sdk.WithGetenv(func(string) string { return "" }),
		sdk.WithIdempotence(true),
	}
	writers := make([]*restartWriter, 2)
	slots := make(chan struct{}, restartInFlight)
	for i, async := range []bool{false, true} {
		rw := &restartWriter{name: "sync", async: async, ok: map[string]bool{}}
		if async {
			rw.name = "async"
		}
		kw := &kafka.Writer{
			Addr:         kafka.TCP(p.Addr()),
			Topic:        topic,
			Balancer:     &kafka.Hash{},
			RequiredAcks: kafka.RequireAll,
			BatchSize:    100,
			BatchTimeout: 5 * time.Millisecond,
			WriteTimeout: 10 * time.Second,
			Async:        async,
		}
		if async {
			kw.Completion = func(msgs []kafka.Message, err error) {
				rw.record(msgs, err)
				for range msgs {
					<-slots
				}
			}
		}
		w, err := sdk.NewWriter(kw, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rw.w = w
		writers[i] = rw
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, rw := range writers {
		wg.Add(1)
		go func() { defer wg.Done(); rw.run(ctx, stop, slots) }()
	}
	stopped := false
	stopWriters := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopWriters()

	// waitFor polls the Writers' counters (events, not time margins) until
	// cond holds; it fails the test when ctx ends first.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-ctx.Done():
				stopWriters()
				t.Fatalf("waiting until %s: %v (acknowledged: sync %d, async %d)", what, ctx.Err(), writers[0].acked.Load(), writers[1].acked.Load())
			case <-tick.C:
			}
		}
	}
	allAcked := func(n [2]int64) func() bool {
		return func() bool { return writers[0].acked.Load() >= n[0] && writers[1].acked.Load() >= n[1] }
	}

	waitFor("both Writers have 1,000 messages acknowledged", allAcked([2]int64{1000, 1000}))
	// The async Writer's held response has 2 more Produce requests in
	// flight behind it (the engine keeps up to 5 per broker): a restarted
	// broker recognises only each producer's last batch per partition as
	// a duplicate, so the resends of the others are answered
	// OUT_OF_ORDER_SEQUENCE_NUMBER.
	writers[1].pollStats()
	asyncID := writers[1].id
	hold.needBehind(asyncID, 2)
	hold.arm()
	select {
	case <-hold.full:
	case <-ctx.Done():
		stopWriters()
		t.Fatalf("waiting for an answered Produce of each Writer to hold: %v", ctx.Err())
	}
	behind := hold.inFlightBehind(asyncID)
	// Counted before the kill: the held responses' cut is each Writer's
	// first retry against the killed broker, and a Writer with nothing
	// else in flight (the sync one's calls wait for the held request)
	// makes no other until the broker is back.
	retriesAtKill := [2]int64{writers[0].pollStats(), writers[1].pollStats()}
	start := time.Now()
	b.Kill9()
	hold.release()
	killed := [2]int64{writers[0].acked.Load(), writers[1].acked.Load()}
	// The pause: until both Writers have retried against the dead broker,
	// so the restart lands in the middle of their resends.
	waitFor("both Writers retry against the killed broker", func() bool {
		return writers[0].pollStats() > retriesAtKill[0] && writers[1].pollStats() > retriesAtKill[1]
	})
	outageSeen := time.Since(start)
	b.Restart()
	restarted := time.Since(start)
	resumeFrom := [2]int64{writers[0].acked.Load() + 1000, writers[1].acked.Load() + 1000}
	waitFor("both Writers have 1,000 more messages acknowledged after the restart", allAcked(resumeFrom))
	resumed := time.Since(start)
	stopWriters()
	for _, rw := range writers {
		if err := rw.w.Close(); err != nil {
			t.Errorf("%s Writer: Close: %v", rw.name, err)
		}
		rw.pollStats()
	}

	if got := hold.cut.Load(); got != 2 {
		t.Errorf("%d held Produce responses cut, want 2 (one per Writer)", got)
	}
	rig := &sdkcRig{addrs: b.Addrs(), topic: topic, parts: parts}
	stored := rig.partitionValues(t)
	figs := map[string]*restartFigures{"sync": {}, "async": {}}
	counts := map[string]int{}
	for p, vals := range stored {
		last := map[string]int{}
		for _, v := range vals {
			counts[v]++
			cut := strings.LastIndexByte(v, '-')
			f, ok := figs[v[:max(cut, 0)]]
			idx, err := strconv.Atoi(v[cut+1:])
			if !ok || err != nil {
				figs["sync"].unknown++
				t.Errorf("partition %d holds %q, which no Writer wrote", p, v)
				continue
			}
			f.stored++
			if prev, seen := last[v[:cut]]; seen && idx <= prev {
				f.reordered++
				t.Errorf("partition %d: %q stored after %s-%07d", p, v, v[:cut], prev)
			}
			last[v[:cut]] = idx
		}
	}
	for _, rw := range writers {
		f := figs[rw.name]
		f.retries, f.bumps, f.resentStored = rw.retries, rw.bumps, rw.stored
		for v, ok := range rw.ok {
			switch {
			case ok:
				f.acked++
				if counts[v] == 0 {
					f.lost++
				}
			default:
				f.failed++
				if counts[v] > 0 {
					f.failedStored++
				}
			}
			if counts[v] > 1 {
				f.dups += counts[v] - 1
			}
		}
		if int64(len(rw.ok)) != rw.handed.Load() {
			t.Errorf("%s Writer: %d messages handed over, %d outcomes reported", rw.name, rw.handed.Load(), len(rw.ok))
		}
		if f.lost != 0 || f.dups != 0 {
			t.Errorf("%s Writer: %d acknowledged messages lost, %d duplicates on the broker; want 0 and 0", rw.name, f.lost, f.dups)
		}
		if f.retries == 0 {
			t.Errorf("%s Writer resent no produce request: the kill did not reach it", rw.name)
		}
		if f.failed != 0 {
			t.Logf("%s Writer: %d messages failed (%d of them stored anyway, once); errors: %v", rw.name, f.failed, f.failedStored, rw.errs)
		}
	}
	t.Logf("async Writer: %d Produce requests in flight behind its held answer at the kill", behind)
	t.Logf("broker killed after %d/%d acknowledged (sync/async), with one answered Produce response of each Writer held (then cut: %d); "+
		"both Writers retrying %v after the kill; broker answering again %v after; "+
		"both Writers 1,000 further messages on %v after; pid starts %d", killed[0], killed[1], hold.cut.Load(),
		outageSeen.Round(time.Millisecond), restarted.Round(time.Millisecond), resumed.Round(time.Millisecond), b.Starts)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-6s %8s %6s %13s %7s %5s %10s %9s %8s %6s %13s\n", "writer", "acked", "failed", "failed+stored", "stored", "lost", "duplicates", "reordered", "retries", "bumps", "resent-stored")
	for _, rw := range writers {
		f := figs[rw.name]
		fmt.Fprintf(&sb, "%-6s %8d %6d %13d %7d %5d %10d %9d %8d %6d %13d\n", rw.name, f.acked, f.failed, f.failedStored, f.stored, f.lost, f.dups, f.reordered, f.retries, f.bumps, f.resentStored)
	}
	t.Log("broker restart on Kafka 4.3.1:\n" + sb.String())
}
