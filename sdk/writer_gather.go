package sdk

// writer_gather.go holds how synchronous calls share produce requests: per
// broker, one request of synchronous traffic in flight, while the
// messages of later calls gather for the next one. It pairs with
// writer_call.go, whose hand-over routes records through it and whose
// promise reports their outcomes.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// gather holds the records of synchronous calls back while the broker
// leading their partition has a wave of them in flight, and hands what
// gathered meanwhile to the engine as the next wave once every record of
// the last one has its outcome.
//
// Why: the engine's idempotent producer keeps one connection per broker
// and pipelines up to 5 requests on it, sending each as soon as a record
// arrives. Kafka serves one request per connection at a time, and an
// acks=all response waits for the followers: concurrent one-message calls
// became requests of about one message queued behind each other. Held
// back while a request is out, they become one request of many messages,
// as kafka-go's per-partition batches are, on the same connection and
// with idempotence kept. A lone caller, and the first call to an idle
// broker, are sent at once; records of partitions whose leader the
// engine does not know yet, re-sends, and async mode (paced by
// BatchTimeout) do not pass here.
//
// Callers that call again as soon as their call returns (a goroutine per
// partition, each making one call after another) come back one by one
// as their wave's records get their outcome. Sent as they come, the first
// back would take the idle broker alone and the others would wait for its
// round trip: two round trips a call. So when a wave has its outcome the
// lane holds its next one until as many calls wait as the last wave had
// plus those that waited before it was answered. With r the last wave's
// round trip, at most holdMax, the hold lasts a quarter of r and then
// goes on while callers keep coming back: checking every sixteenth of r
// (at least holdTick), it ends, sending what gathered, at a check that
// finds no caller come since the last one, or once it lasted r. Hundreds
// of callers need about as long to come back as the broker took to
// answer (their calls are the client's work): a hold of a quarter of the
// round trip sent most of them one wave later. Any call counts as one
// coming back: where new callers keep arriving, a hold may last r. A
// hold that ends without every caller means they were not coming back to
// this broker (keys spread over every partition, handlers that end): the
// lane then sends at once for the next 1, 2, 4 ... 64 waves before it
// holds again.
type gather struct {
	w  *Writer
	mu sync.Mutex
	// lanes by leader node ID; parts pins a partition to the lane its
	// records wait in or fly through, until they all have their outcome,
	// so that a leader change never lets a later record of a partition
	// pass an earlier one. A free pin (no record there) stays for the
	// partition's next record; a wave's last record drops the free ones
	// once there are more than sweepAt (at least pinsKept) pins.
	sweepAt int
	lanes   map[int32]*lane
	parts   map[batchKey]*pinned
	// wg counts the goroutines handing a wave over: Close waits for them.
	wg sync.WaitGroup
	// held counts the records in lanes (waiting or in flight), and
	// each hold as one.
	held atomic.Int64
	// waves and calls count the waves sent and the calls they carried.
	waves, calls int
}

// lane is one broker's synchronous traffic.
type lane struct {
	// busy counts the records of the wave in flight without their
	// outcome; the promise takes g.mu only for a wave's last.
	busy    atomic.Int64
	waiting []*kgo.Record
	calls   int // calls with records in waiting
	// before counts the calls of waiting that came before any record of
	// the wave in flight had its outcome: none of them is a caller of
	// that wave coming back.
	before   int
	answered atomic.Bool // a record of the wave in flight has its outcome
	wave     int         // calls in the wave in flight
	sent     time.Time   // when the wave in flight was handed to the engine
	// The hold of the next wave (see gather): want calls, hold tells
	// one hold from the next, skip counts the waves sent without one.
	// A hold begun at start checks every step whether calls still
	// come (seen: calls at the last check); it lasts between least and
	// most.
	holding           bool
	want              int
	hold              uint64
	skip, timeout     int
	seen              int
	start             time.Time
	step, least, most time.Duration
}

// holdMax bounds how long a lane holds its next wave for returning
// callers; holdTick is the shortest step between a hold's checks.
const (
	holdMax  = 10 * time.Millisecond
	holdTick = 20 * time.Microsecond
)

// holdFor returns how often a hold after a wave that took rtt checks
// whether callers still come back, how long it lasts at least and at
// most.
func holdFor(rtt time.Duration) (step, least, most time.Duration) {
	if d := time.Duration(gatherHold.Load()); d != 0 {
		return d, d, d
	}
	most = min(rtt, holdMax)
	return max(most/16, holdTick), most / 4, most
}

// gatherHold, when not 0, makes a hold one check after that long
// (negative: no hold), so that tests can wait for the event alone and
// benchmarks can measure what the hold brings.
var gatherHold atomic.Int64

// pinned is a partition's lane while it has records there (n of them;
// at 0 the partition is free to follow its leader to another lane).
type pinned struct {
	l *lane
	n atomic.Int32
}

// pinsKept is how many partitions' pins, free ones included, the
// gather keeps at least before it drops the free ones: at most twice as
// many as there were after the last sweep.
const pinsKept = 1024

func newGather(w *Writer) *gather {
	return &gather{w: w, lanes: map[int32]*lane{}, parts: map[batchKey]*pinned{}}
}

// take hands the records of a call to the engine through their
// partitions' lanes, and reports false, taking none, when the call is
// the Writer's only one waiting and no record is in a lane: a lone caller
// goes to the engine directly, with nothing to wait for. A lane idle
// before the call sends the call's records there at once, as its wave; a
// busy or holding one keeps them, in order, for its next wave, which a
// hold sends once the call is the last it waited for. A record whose
// partition has no lane (not chosen yet, or its leader not loaded by the
// engine) goes to the engine at once: none of its partition waits in a
// lane.
func (g *gather) take(cl *kgo.Client, slots []slot) bool {
	if g.held.Load() == 0 && g.w.awaited.Load() <= 1 {
		return false
	}
	var sendBuf [8]*kgo.Record
	var freshBuf, joinedBuf [4]*lane
	send, fresh, joined := sendBuf[:0], freshBuf[:0], joinedBuf[:0]
	var direct []*kgo.Record
	g.mu.Lock()
	for i := range slots {
		sl := &slots[i]
		pp := g.pin(cl, sl.rec.Topic, sl.st.pre)
		if pp == nil {
			direct = append(direct, &sl.rec)
			continue
		}
		l := pp.l
		sl.st.lane, sl.st.pin = l, pp
		switch {
		case slices.Contains(fresh, l):
		case l.busy.Load() == 0 && len(l.waiting) == 0 && !l.holding:
			fresh = append(fresh, l)
			l.wave, l.sent = 1, time.Now()
			l.answered.Store(false)
			g.waves++
			g.calls++
		default:
			if !slices.Contains(joined, l) {
				joined = append(joined, l)
				l.calls++
				if l.busy.Load() > 0 && !l.answered.Load() {
					l.before++
				}
			}
			l.waiting = append(l.waiting, &sl.rec)
			continue
		}
		send = append(send, &sl.rec)
	}
	for _, r := range send {
		r.Context.(*recState).lane.busy.Add(1)
	}
	ended := 0
	for _, l := range joined {
		if l.holding && l.calls >= l.want {
			// Every caller the hold waited for is here.
			l.holding, l.timeout = false, 0
			send = g.launch(l, send)
			ended++
		}
	}
	g.held.Add(int64(len(slots) - len(direct) - ended))
	g.mu.Unlock()
	// Direct ones first: a record of the same partition that got a lane
	// after them (its leader loaded meanwhile) comes later in the call.
	for _, r := range direct {
		cl.Produce(context.Background(), r, g.w.promise)
	}
	for _, r := range send {
		r.Context.(*recState).cl = cl // a hold's wave may have others' records
		cl.Produce(context.Background(), r, g.w.promise)
	}
	return true
}

// pin pins topic's partition p to a lane, the one it is pinned to or
// its leader's, and returns the pin; nil when p has none. g.mu is held.
func (g *gather) pin(cl *kgo.Client, topic string, p int32) *pinned {
	if p < 0 {
		return nil
	}
	k := batchKey{topic, p}
	pp := g.parts[k]
	if pp == nil || pp.n.Load() == 0 {
		// Free (n only drops without g.mu): the leader decides.
		leader, _, err := cl.PartitionLeader(topic, p)
		if err != nil || leader < 0 {
			return nil
		}
		if pp == nil {
			pp = &pinned{}
			g.parts[k] = pp
		}
		if pp.l = g.lanes[leader]; pp.l == nil {
			pp.l = &lane{}
			g.lanes[leader] = pp.l
		}
	}
	pp.n.Add(1)
	return pp
}

// done notes that the record of st, which went through a lane, has its
// outcome; the last record of a wave sends what gathered. It runs in the
// engine's promise, where Produce must not be called (it may wait for
// buffer room that only the promise frees).
//
// Only a wave's last record takes g.mu: the callers coming back take it
// to join the next wave meanwhile, and the promise hands the outcomes
// out one after another.
func (g *gather) done(st *recState) {
	l := st.lane
	st.pin.n.Add(-1)
	l.answered.Store(true)
	g.held.Add(-1)
	if l.busy.Add(-1) != 0 {
		return
	}
	var wave []*kgo.Record
	g.mu.Lock()
	if len(g.parts) > max(g.sweepAt, pinsKept) {
		for k, pp := range g.parts {
			if pp.n.Load() == 0 {
				delete(g.parts, k)
			}
		}
		g.sweepAt = 2 * len(g.parts)
	}
	// A call that came once busy dropped to 0, with nothing waiting,
	// may have sent a wave already: the last of that one decides.
	if l.busy.Load() == 0 && !l.holding {
		want := l.wave + l.before
		switch {
		case g.w.closed.Load():
			wave = g.launch(l, nil)
		case l.skip > 0:
			l.skip--
			wave = g.launch(l, nil)
		case l.calls >= want || gatherHold.Load() < 0:
			l.timeout = 0
			wave = g.launch(l, nil)
		default:
			// Hold the next wave for the callers coming back; the
			// hold counts as a record held until it ends.
			l.holding, l.want = true, want
			l.hold++
			g.held.Add(1)
			l.seen, l.start = l.calls, time.Now()
			l.step, l.least, l.most = holdFor(l.start.Sub(l.sent))
			hold := l.hold
			time.AfterFunc(l.step, func() { g.expire(l, hold) })
		}
	}
	g.mu.Unlock()
	if len(wave) > 0 {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.produce(wave)
		}()
	}
}

// launch makes what waits in l its wave in flight and appends its
// records to send. g.mu is held.
func (g *gather) launch(l *lane, send []*kgo.Record) []*kgo.Record {
	if len(l.waiting) == 0 {
		return send
	}
	send = append(send, l.waiting...)
	l.busy.Add(int64(len(l.waiting)))
	l.wave, l.sent = l.calls, time.Now()
	l.answered.Store(false)
	g.waves++
	g.calls += l.calls
	l.waiting, l.calls, l.before = nil, 0, 0
	return send
}

// expire checks l's hold number hold, a step after it began or was last
// checked: while callers still come and the hold has time left, it goes
// on; otherwise it ends without all the callers it waited for, l sends
// what gathered, and holds no wave for a while.
func (g *gather) expire(l *lane, hold uint64) {
	g.mu.Lock()
	if !l.holding || l.hold != hold {
		g.mu.Unlock()
		return
	}
	if l.holdOn(time.Since(l.start)) {
		l.seen = l.calls
		step := l.step // a later hold may set it once g.mu is let go
		g.mu.Unlock()
		time.AfterFunc(step, func() { g.expire(l, hold) })
		return
	}
	l.holding = false
	l.timeout = min(l.timeout+1, 7)
	l.skip = 1 << (l.timeout - 1)
	wave := g.launch(l, nil)
	g.held.Add(-1)
	g.mu.Unlock()
	g.produce(wave)
}

// holdOn reports whether l's hold, at a check held after it began, goes
// on to the next check: while it is shorter than least, or callers came
// since the last check, as long as the next check comes within most.
// g.mu is held.
func (l *lane) holdOn(held time.Duration) bool {
	return held+l.step <= l.most && (held < l.least || l.calls > l.seen)
}

// flush ends every hold and hands every record waiting in a lane to the
// engine now, behind the waves in flight: the Writer is closing, or a
// call that does not pass the lanes (one larger than the engine's
// buffer) must come after the records of its partitions that wait there.
func (g *gather) flush() {
	var wave []*kgo.Record
	g.mu.Lock()
	for _, l := range g.lanes {
		if l.holding {
			l.holding = false
			g.held.Add(-1)
		}
		wave = g.launch(l, wave)
	}
	g.mu.Unlock()
	g.produce(wave)
}

// produce hands wave to the Writer's current engine.
func (g *gather) produce(wave []*kgo.Record) {
	cl := g.w.engine()
	for _, r := range wave {
		r.Context.(*recState).cl = cl
		cl.Produce(context.Background(), r, g.w.promise)
	}
}

// gatherOff turns gathering off for the Writers made after it, so that
// benchmarks can measure what it brings.
var gatherOff atomic.Bool
