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
type gather struct {
	w  *Writer
	mu sync.Mutex
	// lanes by leader node ID; parts pins a partition to the lane its
	// records wait in or fly through, until they all have their outcome,
	// so that a leader change never lets a later record of a partition
	// pass an earlier one.
	lanes map[int32]*lane
	parts map[batchKey]pinned
	// wg counts the goroutines handing a wave over: Close waits for them.
	wg sync.WaitGroup
	// held counts the records in lanes (waiting or in flight).
	held atomic.Int64
}

// lane is one broker's synchronous traffic.
type lane struct {
	busy    int // records of the wave in flight without their outcome
	waiting []*kgo.Record
}

// pinned is a partition's lane while it has records there.
type pinned struct {
	l *lane
	n int
}

func newGather(w *Writer) *gather {
	return &gather{w: w, lanes: map[int32]*lane{}, parts: map[batchKey]pinned{}}
}

// take hands the records of a call to the engine through their
// partitions' lanes, and reports false, taking none, when the call is
// the Writer's only one waiting and no record is in a lane: a lone caller
// goes to the engine directly, with nothing to wait for. A lane idle
// before the call sends the call's records there at once, as its wave; a
// busy one keeps them, in order, for its next wave. A record whose
// partition has no lane (not chosen yet, or its leader not loaded by the
// engine) goes to the engine at once: none of its partition waits in a
// lane.
func (g *gather) take(cl *kgo.Client, slots []slot) bool {
	if g.held.Load() == 0 && g.w.awaited.Load() <= 1 {
		return false
	}
	var sendBuf [8]*kgo.Record
	var freshBuf [4]*lane
	send, fresh := sendBuf[:0], freshBuf[:0]
	var direct []*kgo.Record
	g.mu.Lock()
	for i := range slots {
		sl := &slots[i]
		l := g.pin(cl, sl.rec.Topic, sl.st.pre)
		if l == nil {
			direct = append(direct, &sl.rec)
			continue
		}
		sl.st.lane = l
		switch {
		case slices.Contains(fresh, l):
		case l.busy == 0 && len(l.waiting) == 0:
			fresh = append(fresh, l)
		default:
			l.waiting = append(l.waiting, &sl.rec)
			continue
		}
		send = append(send, &sl.rec)
	}
	for _, r := range send {
		r.Context.(*recState).lane.busy++
	}
	g.held.Add(int64(len(slots) - len(direct)))
	g.mu.Unlock()
	// Direct ones first: a record of the same partition that got a lane
	// after them (its leader loaded meanwhile) comes later in the call.
	for _, r := range direct {
		cl.Produce(context.Background(), r, g.w.promise)
	}
	for _, r := range send {
		cl.Produce(context.Background(), r, g.w.promise)
	}
	return true
}

// pin pins topic's partition p to a lane, the one it is pinned to or
// its leader's, and returns the lane; nil when p has none. g.mu is held.
func (g *gather) pin(cl *kgo.Client, topic string, p int32) *lane {
	if p < 0 {
		return nil
	}
	k := batchKey{topic, p}
	pp, ok := g.parts[k]
	if !ok {
		leader, _, err := cl.PartitionLeader(topic, p)
		if err != nil || leader < 0 {
			return nil
		}
		if pp.l = g.lanes[leader]; pp.l == nil {
			pp.l = &lane{}
			g.lanes[leader] = pp.l
		}
	}
	pp.n++
	g.parts[k] = pp
	return pp.l
}

// done notes that r, which went through a lane, has its outcome; the
// last record of a wave sends what gathered. It runs in the engine's
// promise, where Produce must not be called (it may wait for buffer room
// that only the promise frees).
func (g *gather) done(r *kgo.Record, st *recState) {
	l := st.lane
	k := batchKey{r.Topic, st.pre}
	g.mu.Lock()
	if pp := g.parts[k]; pp.n <= 1 {
		delete(g.parts, k)
	} else {
		pp.n--
		g.parts[k] = pp
	}
	l.busy--
	g.held.Add(-1)
	var wave []*kgo.Record
	if l.busy == 0 && len(l.waiting) > 0 {
		wave, l.waiting = l.waiting, nil
		l.busy = len(wave)
	}
	g.mu.Unlock()
	if wave == nil {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		cl := g.w.engine()
		for _, r := range wave {
			r.Context.(*recState).cl = cl
			cl.Produce(context.Background(), r, g.w.promise)
		}
	}()
}

// gatherOff turns gathering off for the Writers made after it, so that
// benchmarks can measure what it brings.
var gatherOff atomic.Bool
