package sdk

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// queueRun is n records of partition p from offset from.
func queueRun(p int32, from int64, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t", Partition: p, Offset: from + int64(i)}
	}
	return recs
}

// drain takes every record left in q as "partition/offset".
func drain(q *recordQueue) []string {
	var out []string
	for {
		f, ok := q.next()
		if !ok {
			return out
		}
		out = append(out, fmt.Sprintf("%d/%d", f.rec.Partition, f.rec.Offset))
	}
}

// TestRecordQueue: the queue hands out its runs in order, counts what
// waits, and drop takes out whole partitions, also the rest of the run
// being handed out, naming the first offset that waited.
func TestRecordQueue(t *testing.T) {
	var q recordQueue
	if _, ok := q.next(); ok || !q.empty() || q.len() != 0 {
		t.Fatal("a new queue is not empty")
	}
	sts := []partState{{}, {}, {}}
	q.push(queueRun(0, 10, 3), 20, &sts[0])
	q.push(queueRun(1, 5, 2), 7, &sts[1])
	q.push(queueRun(2, 0, 1), 1, &sts[2])
	if q.len() != 6 {
		t.Fatalf("len %d, want 6", q.len())
	}
	f, _ := q.next()
	if f.rec.Offset != 10 || f.hwm != 20 || f.st != &sts[0] {
		t.Fatalf("first %+v", f)
	}
	if q.len() != 5 {
		t.Fatalf("len %d after one, want 5", q.len())
	}
	var dropped []string
	q.drop(func(tp topicPartition, first int64) bool {
		if tp.partition == 0 || tp.partition == 2 {
			dropped = append(dropped, fmt.Sprintf("%d/%d", tp.partition, first))
			return true
		}
		return false
	})
	if want := []string{"0/11", "2/0"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	if got, want := drain(&q), []string{"1/5", "1/6"}; !slices.Equal(got, want) {
		t.Errorf("after drop: %v, want %v", got, want)
	}
	if !q.empty() || q.len() != 0 || len(q.runs) != 0 {
		t.Errorf("drained queue: empty %v, len %d, runs %d", q.empty(), q.len(), len(q.runs))
	}

	// A drop that keeps the run being handed out keeps its rest only.
	q.push(queueRun(0, 0, 3), 3, nil)
	q.push(queueRun(1, 0, 2), 2, nil)
	q.next()
	q.next()
	q.drop(func(tp topicPartition, _ int64) bool { return tp.partition == 1 })
	if got, want := drain(&q), []string{"0/2"}; !slices.Equal(got, want) {
		t.Errorf("after dropping the next run: %v, want %v", got, want)
	}
	q.drop(func(topicPartition, int64) bool { t.Error("drop of an empty queue asked"); return true })

	// reset lets go of every run.
	q.push(queueRun(0, 0, 2), 2, nil)
	q.reset()
	if !q.empty() || len(drain(&q)) != 0 || slices.ContainsFunc(q.runs[:cap(q.runs)], func(r run) bool { return r.recs != nil }) {
		t.Error("reset kept records")
	}
}
