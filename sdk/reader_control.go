package sdk

// reader_control.go holds the consumer controls kafka-go's Reader never
// had: pausing and resuming partitions (Pause, Resume, Paused) and moving
// a group member within a partition it owns (Seek). It pairs with
// reader_fetch.go, whose poll keeps no record of a paused partition or of
// one moved while it ran, and rewinds the engine to the first it dropped.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/azkafka/azkafka/metrics"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// controls is what Pause and Seek changed, as poll and next consult it.
// Guarded by Reader.mu.
type controls struct {
	// pausedTopics and pausedParts are what Pause paused.
	pausedTopics map[string]bool
	pausedParts  map[topicPartition]bool
	// rewind is, per paused partition, the lowest offset of the records
	// the Reader dropped without handing them out: the engine is moved
	// back to it, so Resume reads them again.
	rewind map[topicPartition]int64
	// sought is, per partition Seek moved, the value of Reader.moves
	// then: a commit of marks taken before it puts none back when it
	// fails (commitMarks), and a poll that began before it keeps none of
	// its records (none can: Seek holds pollSem).
	sought map[topicPartition]uint64
}

// pausedLocked reports whether tp is paused. r.mu is held.
func (r *Reader) pausedLocked(tp topicPartition) bool {
	return r.ctl.pausedTopics[tp.topic] || r.ctl.pausedParts[tp]
}

// Pause stops handing out and fetching messages of topic's partitions
// (all of them, including those assigned later, when none are given)
// until Resume. Messages of them the Reader had fetched but not handed
// out are handed out after Resume, in order: nothing is skipped or handed
// out twice. Pauses last across rebalances: a paused partition the group
// takes away and gives back is still paused. Pausing a partition the
// Reader does not consume is recorded, and applies once it does. Safe to
// call from a RebalanceCallbacks function. kafka-go has no such method.
func (r *Reader) Pause(topic string, partitions ...int) {
	r.mu.Lock()
	if len(partitions) == 0 {
		r.ctl.pausedTopics[topic] = true
	}
	ps := make([]int32, len(partitions))
	for i, p := range partitions {
		ps[i] = int32(p)
		r.ctl.pausedParts[topicPartition{topic, int32(p)}] = true
	}
	r.mu.Unlock()
	if len(partitions) == 0 {
		r.engine().PauseFetchTopics(topic)
	} else {
		r.engine().PauseFetchPartitions(map[string][]int32{topic: ps})
	}
	// What was fetched of them before the engine paused waits in the
	// buffer: take it out, and move the engine back to it.
	r.mu.Lock()
	r.q.drop(func(tp topicPartition, first int64) bool {
		if r.pausedLocked(tp) {
			r.noteRewindLocked(tp, first)
			return true
		}
		return false
	})
	r.mu.Unlock()
	r.applyRewinds()
}

// Resume resumes topic's partitions paused by Pause: those given, or,
// when none are given, the topic and every partition of it paused one by
// one. Resuming what is not paused does nothing.
func (r *Reader) Resume(topic string, partitions ...int) {
	r.rewindMu.Lock()
	defer r.rewindMu.Unlock()
	r.mu.Lock()
	ps := map[string][]int32{}
	for tp := range r.ctl.pausedParts {
		if tp.topic == topic && (len(partitions) == 0 || slices.Contains(partitions, int(tp.partition))) {
			ps[topic] = append(ps[topic], tp.partition)
			delete(r.ctl.pausedParts, tp)
		}
	}
	whole := len(partitions) == 0 && r.ctl.pausedTopics[topic]
	delete(r.ctl.pausedTopics, topic)
	for tp := range r.ctl.rewind {
		if !r.pausedLocked(tp) {
			delete(r.ctl.rewind, tp)
		}
	}
	r.mu.Unlock()
	if whole {
		r.engine().ResumeFetchTopics(topic)
	}
	if len(ps) > 0 {
		r.engine().ResumeFetchPartitions(ps)
	}
}

// Paused returns what Pause paused: whole topics, and partitions by topic.
func (r *Reader) Paused() (topics []string, partitions map[string][]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t := range r.ctl.pausedTopics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	partitions = map[string][]int{}
	for tp := range r.ctl.pausedParts {
		partitions[tp.topic] = append(partitions[tp.topic], int(tp.partition))
	}
	for _, ps := range partitions {
		slices.Sort(ps)
	}
	return topics, partitions
}

// noteRewindLocked records that the record at offset of paused tp was
// dropped unread. r.mu is held.
func (r *Reader) noteRewindLocked(tp topicPartition, offset int64) {
	if o, ok := r.ctl.rewind[tp]; !ok || offset < o {
		r.ctl.rewind[tp] = offset
	}
}

// applyRewinds moves the engine back to the lowest dropped offset of each
// paused partition. rewindMu orders it with Seek and Resume, so that a
// later, higher rewind never lands after a lower one.
func (r *Reader) applyRewinds() {
	r.rewindMu.Lock()
	defer r.rewindMu.Unlock()
	r.mu.Lock()
	set := map[string]map[int32]kgo.EpochOffset{}
	for tp, o := range r.ctl.rewind {
		if r.pausedLocked(tp) {
			partitionsOf(set, tp.topic)[tp.partition] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	r.mu.Unlock()
	if len(set) > 0 {
		r.engine().SetOffsets(set)
	}
}

// Seek moves the Reader within a partition it consumes: the next message
// of topic's partition it hands out is the one at offset
// (kafka.FirstOffset and kafka.LastOffset: the log's start and end, asked
// of the leader). In group mode, where kafka-go refuses SetOffset, the
// partition must be one the group assigned the Reader (else an error
// matching ErrNotOwned), and the move lasts while the Reader owns it: a
// rebalance that takes it away and gives it back starts again from the
// committed offset. Seek commits nothing; with CommitInterval > 0 it
// forgets the partition's offset marked and not yet committed, so the
// next commit is that of what CommitMessages is given after the move
// (seeking back and committing again moves the group's offset back). In
// partition mode it is SetOffset for the Reader's own partition. Safe
// while other goroutines fetch: a fetch in flight is interrupted and goes
// on from offset, and no message of the partition handed out after Seek
// returns is from before the move. After Close it returns
// io.ErrClosedPipe, as SetOffset does. Not for a RebalanceCallbacks
// function. kafka-go has no such method.
func (r *Reader) Seek(ctx context.Context, topic string, partition int, offset int64) error {
	tp := topicPartition{topic, int32(partition)}
	if !r.group {
		if topic != r.config.Topic || partition != r.config.Partition {
			return fmt.Errorf("sdk: Seek %s[%d]: %w (it reads %s[%d])", topic, partition, ErrNotOwned, r.config.Topic, r.config.Partition)
		}
		return r.SetOffset(offset)
	}
	if r.closed.Load() {
		return io.ErrClosedPipe
	}
	if offset == kafka.FirstOffset || offset == kafka.LastOffset {
		ts := int64(-2)
		if offset == kafka.LastOffset {
			ts = -1
		}
		var at map[topicPartition]int64
		err := r.retrying(ctx, metrics.OpListOffsets, func(ctx context.Context) (err error) {
			at, err = r.listOffsets(ctx, []topicPartition{tp}, ts)
			return err
		}, engineTransient)
		if err != nil {
			return fmt.Errorf("sdk: Seek %s[%d]: %w", topic, partition, err)
		}
		offset = at[tp]
	}
	if offset < 0 {
		return fmt.Errorf("sdk: Seek %s[%d]: offset %d: want >= 0, kafka.FirstOffset or kafka.LastOffset", topic, partition, offset)
	}
	// No poll may run from here until the engine has moved: one that
	// began after the buffer is emptied below and before SetOffsets
	// returns would take the records of the old position the engine had
	// buffered, and one that began before and ended after would drop
	// those of the new one. Lock order: pollSem, rewindMu, mu (poll holds
	// pollSem when it takes rewindMu in applyRewinds).
	if err := r.holdPolls(ctx); err != nil {
		return fmt.Errorf("sdk: Seek %s[%d]: %w", topic, partition, err)
	}
	defer func() { <-r.pollSem }()
	r.rewindMu.Lock()
	defer r.rewindMu.Unlock()
	r.mu.Lock()
	st, owned := r.owned[tp]
	if !owned {
		r.mu.Unlock()
		return fmt.Errorf("sdk: Seek %s[%d]: %w", topic, partition, ErrNotOwned)
	}
	r.moves++
	r.ctl.sought[tp] = r.moves
	st.position = offset
	delete(r.ctl.rewind, tp)
	if m := r.marksLocked()[topic]; m != nil {
		delete(m, tp.partition)
	}
	r.q.drop(func(p topicPartition, _ int64) bool { return p == tp })
	moves := r.moves
	r.mu.Unlock()
	r.readCommits.forget(tp, moves) // ReadMessage commits from the new position on
	r.engine().SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {tp.partition: {Epoch: -1, Offset: offset}}})
	return nil
}

// holdPolls ends the poll in flight (its caller polls again) and keeps
// others out until the caller receives from pollSem (Seek, SetOffset): a
// FetchMessage waiting for its turn may start a poll meanwhile, so it
// interrupts again until it holds pollSem. It returns ctx's error if ctx
// ends first.
func (r *Reader) holdPolls(ctx context.Context) error {
	mark := r.hooks.errSeq.Load()
	r.mu.Lock()
	if r.holders++; r.pollGate == nil {
		r.pollGate = make(chan struct{})
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.holders--; r.holders == 0 {
			close(r.pollGate)
			r.pollGate = nil
		}
		r.mu.Unlock()
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r.interrupt(context.Canceled)
		select {
		case r.pollSem <- struct{}{}:
			return nil
		case <-ctx.Done():
			return r.ctxError(ctx, mark)
		case <-tick.C:
		}
	}
}
