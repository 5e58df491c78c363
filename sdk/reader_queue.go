package sdk

// reader_queue.go holds the Reader's queue of polled records: the
// engine's own record slices, one run per partition, handed out in place.

import "github.com/twmb/franz-go/pkg/kgo"

// fetched is a record handed out, with its partition's high watermark and,
// in group mode, its state.
type fetched struct {
	rec   *kgo.Record
	hwm   int64
	st    *partState
	moves uint64 // Reader.moves when it was handed out
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
	f = fetched{rec: ru.recs[q.rh], hwm: ru.hwm, st: ru.st}
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
