package sdk

// reader_queue.go holds the Reader's queue of polled records: the
// engine's own record slices, one run per partition, handed out in place.

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetched is a record handed out, with its partition's high watermark and,
// in group mode, its state.
type fetched struct {
	rec   *kgo.Record
	hwm   int64
	st    *partState
	moves uint64 // Reader.moves when it was handed out
	// tail: rec is the last its poll returned of its partition.
	tail bool
}

// run is one partition's records of a poll, in offset order: the slice
// the engine returned, not a copy.
type run struct {
	recs []*kgo.Record
	hwm  int64
	st   *partState
}

// recordQueue is what polls took from the engine and the Reader has not
// handed out: runs[ri].recs[rh] is next. A poll's records are queued as
// the engine returned them, one run per partition, so that queuing costs
// a few writes per partition and handing out none per record (a record
// handed out is not written over; the runs go at once after the last).
// The Reader's mu guards it.
type recordQueue struct {
	runs   []run
	ri, rh int
}

// push queues recs (not empty) of one partition.
func (q *recordQueue) push(recs []*kgo.Record, hwm int64, st *partState) {
	q.runs = append(q.runs, run{recs: recs, hwm: hwm, st: st})
}

// next takes the next record; ok is false when the queue is empty.
func (q *recordQueue) next() (f fetched, ok bool) {
	if q.ri == len(q.runs) {
		return fetched{}, false
	}
	ru := &q.runs[q.ri]
	f = fetched{rec: ru.recs[q.rh], hwm: ru.hwm, st: ru.st, tail: q.rh+1 == len(ru.recs)}
	if q.rh++; q.rh == len(ru.recs) {
		if q.ri, q.rh = q.ri+1, 0; q.ri == len(q.runs) {
			q.reset()
		}
	}
	return f, true
}

// empty reports whether no record waits.
func (q *recordQueue) empty() bool { return q.ri == len(q.runs) }

// len is the number of records waiting.
func (q *recordQueue) len() int {
	n := 0
	for i := q.ri; i < len(q.runs); i++ {
		n += len(q.runs[i].recs)
	}
	return n - q.rh
}

// reset empties the queue, letting go of the engine's records.
func (q *recordQueue) reset() {
	clear(q.runs)
	q.runs, q.ri, q.rh = q.runs[:0], 0, 0
}

// drop takes out the waiting records of every partition gone says, which
// is given the partition and the offset of its first record waiting.
func (q *recordQueue) drop(gone func(tp topicPartition, first int64) bool) {
	if q.empty() {
		return
	}
	q.runs[q.ri].recs = q.runs[q.ri].recs[q.rh:]
	kept := q.runs[:0]
	for _, ru := range q.runs[q.ri:] {
		first := ru.recs[0]
		if !gone(topicPartition{first.Topic, first.Partition}, first.Offset) {
			kept = append(kept, ru)
		}
	}
	clear(q.runs[len(kept):])
	q.runs, q.ri, q.rh = kept, 0, 0
}

// recordSlabs lends the engine the slices it decodes a fetch's records
// into (kgo.PoolRecords), so that a Reader reading fast reuses them
// instead of allocating about 170 bytes a record that the garbage
// collector must then find dead. A slab comes back (through
// kgo.Record.Recycle) once every record decoded into it was handed out
// as a kafka.Message; records the Reader drops (a Seek, a rebalance,
// Close) are not recycled and their slab is left to the garbage
// collector. A Message shares no memory with its record: its Key and
// Value are the fetch response's bytes, not the slab's.
//
// One recordSlabs serves every Reader of the process (readerSlabs).
type recordSlabs struct {
	classes [slabClasses]sync.Pool // of *[]kgo.Record; class c holds capacity 1<<c
	reused  atomic.Int64           // slabs lent again
}

// slabClasses bounds the pooled slabs at 1<<15 records; a larger batch's
// slab is allocated and not kept.
const slabClasses = 16

// GetRecords implements kgo.PoolRecords.
func (p *recordSlabs) GetRecords(n int) []kgo.Record {
	c := bits.Len(uint(max(n-1, 0)))
	if c >= slabClasses {
		return nil // the engine allocates it
	}
	if s, ok := p.classes[c].Get().(*[]kgo.Record); ok {
		p.reused.Add(1)
		return *s
	}
	return make([]kgo.Record, 0, 1<<c)
}

// PutRecords implements kgo.PoolRecords.
func (p *recordSlabs) PutRecords(s []kgo.Record) {
	c := bits.Len(uint(cap(s))) - 1
	if c < 0 || c >= slabClasses || cap(s) != 1<<c {
		return // not one of ours (the engine grew it)
	}
	// Records decoded but not handed out (below the offset asked for)
	// were not recycled: clear them, not to hold their responses.
	clear(s)
	s = s[:0]
	p.classes[c].Put(&s)
}

// readerSlabs is the slabs every Reader's engine decodes into.
var readerSlabs recordSlabs
