package sdk

// reader_partition.go holds partition mode's position: where the engine
// starts consuming (kafka-go's rules for offsets below the log's start and
// past its end), Offset, Lag, ReadLag, SetOffset and SetOffsetAt, and the
// ListOffsets requests behind them. It pairs with reader_fetch.go, which
// calls start before each poll.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
)

// start makes the engine consume the partition (partition mode) from the
// offset set so far, at the first read as kafka-go's reader starts: an
// offset below the log's start starts there, one past its end is waited
// for (or, with OffsetOutOfRangeError, is kafka.OffsetOutOfRange). It
// reports whether the engine consumes the partition.
func (r *Reader) start(ctx context.Context) (bool, error) {
	if r.group {
		return true, nil
	}
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return true, nil
	}
	want, moves := r.offset, r.moves
	r.mu.Unlock()
	off := kgo.NewOffset().AtStart() // kafka.FirstOffset, and kafka-go's below-start
	switch {
	case want == kafka.LastOffset && r.config.IsolationLevel == kafka.ReadCommitted:
		// The engine's end would be the last stable offset: kafka-go's
		// is the high watermark, past an open transaction.
		last, err := r.listOffset(ctx, -1)
		if err != nil {
			return false, err
		}
		off = kgo.NewOffset().At(last)
	case want == kafka.LastOffset:
		off = kgo.NewOffset().AtEnd()
	case want >= 0:
		first, err := r.listOffset(ctx, -2)
		if err != nil {
			return false, err
		}
		last, err := r.listOffset(ctx, -1)
		if err != nil {
			return false, err
		}
		switch {
		case want > last && r.config.OffsetOutOfRangeError:
			return false, kafkaError(fmt.Errorf("sdk: %s[%d]: offset %d is past the end of the log (%d): %w",
				r.config.Topic, r.config.Partition, want, last, kerr.OffsetOutOfRange))
		case want > last:
			return false, nil
		case want >= first:
			off = kgo.NewOffset().At(want)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moves != moves {
		return false, nil // SetOffset moved it meanwhile: start again
	}
	r.started = true
	r.waits.Store(0)
	r.engine().AddConsumePartitions(map[string]map[int32]kgo.Offset{r.config.Topic: {int32(r.config.Partition): off}})
	return true, nil
}

// Lag returns the lag of the last message returned by ReadMessage or
// FetchMessage (the partition's high watermark minus the next offset), like
// kafka.Reader.Lag. With a consumer group, where kafka-go's is -1, it is
// the sum of the lags of the owned partitions whose lag is known (from
// their fetches, or ReadLag), -1 while none is (see Assignment).
func (r *Reader) Lag() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group {
		if lag, ok := r.groupLagLocked(); ok {
			return lag
		}
		return -1
	}
	return r.lag
}

// Offset returns the offset of the next message the reader hands out
// (kafka.FirstOffset before the first read unless SetOffset moved it),
// like kafka.Reader.Offset. With a consumer group, where kafka-go's is -1,
// it is that of the partition the Reader owns when it owns exactly one
// and knows it, else -1 (see Assignment).
func (r *Reader) Offset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group {
		return r.groupOffsetLocked()
	}
	return r.offset
}

// ReadLag asks the partition's leader for its last offset and returns the
// lag of the reader's offset behind it, like kafka.Reader.ReadLag,
// retrying transient errors until ctx is done: negative, as kafka-go's,
// when SetOffset put the reader past the end of the log. With a consumer
// group, where kafka-go's returns an error, it asks the leaders of the owned
// partitions and returns the sum of their lags (0 while the Reader owns
// none), which Lag, Stats and Assignment then show too.
func (r *Reader) ReadLag(ctx context.Context) (int64, error) {
	if r.group {
		return r.readGroupLag(ctx)
	}
	last, err := r.listOffset(ctx, -1)
	if err != nil {
		return 0, err
	}
	off := r.Offset()
	switch off {
	case kafka.LastOffset:
		return 0, nil
	case kafka.FirstOffset:
		first, err := r.listOffset(ctx, -2)
		if err != nil {
			return 0, err
		}
		off = first
	}
	return last - off, nil
}

// SetOffset moves the reader to offset (or kafka.FirstOffset,
// kafka.LastOffset), like kafka.Reader.SetOffset: the next message is the
// one at offset. As in kafka-go, an offset below the log's start (any
// other negative one too) reads from the start, and one past the end waits
// for the log to reach it (see OffsetOutOfRangeError). Messages fetched
// but not yet handed out are dropped, unless offset is the one the Reader
// reads next (Offset): then, as in kafka-go, nothing changes. It fails
// with io.ErrClosedPipe after Close.
func (r *Reader) SetOffset(offset int64) error {
	if r.group {
		return fmt.Errorf("sdk: SetOffset: %w", errGroupOnly)
	}
	if r.closed.Load() {
		return io.ErrClosedPipe
	}
	r.mu.Lock()
	same := offset == r.offset
	r.mu.Unlock()
	if same {
		// The offset the Reader reads next: as kafka-go's, it keeps what
		// it has fetched.
		return nil
	}
	// Stop the poll in flight and keep others out while the engine moves.
	if err := r.holdPolls(context.Background()); err != nil {
		return err // not with a context that does not end
	}
	defer func() { <-r.pollSem }()
	r.rewindMu.Lock() // lock order: pollSem, rewindMu, mu (see Seek)
	defer r.rewindMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	tp := topicPartition{r.config.Topic, int32(r.config.Partition)}
	r.moves++
	// What a Pause dropped before the move is no longer where the
	// partition resumes.
	delete(r.ctl.rewind, tp)
	r.q.reset()
	r.offset = offset // the lag stays that of the last message, as in kafka-go
	if r.started {
		// The next read starts it again at offset (see start).
		r.engine().RemoveConsumePartitions(map[string][]int32{tp.topic: {tp.partition}})
		r.started = false
	}
	return nil
}

// SetOffsetAt moves the reader to the first offset whose timestamp is at or
// after t (kafka.LastOffset when there is none), like
// kafka.Reader.SetOffsetAt.
func (r *Reader) SetOffsetAt(ctx context.Context, t time.Time) error {
	if r.closed.Load() {
		return io.ErrClosedPipe // kafka-go's checks this first, with a group too
	}
	if r.group {
		return fmt.Errorf("sdk: SetOffsetAt: %w", errGroupOnly)
	}
	off, err := r.listOffset(ctx, t.UnixMilli())
	if err != nil {
		return err
	}
	if off < 0 {
		off = kafka.LastOffset
	}
	return r.SetOffset(off)
}

// listOffset asks the partition's leader for the offset at timestamp ts
// (-1: the end, -2: the start), retrying transient errors until ctx is
// done.
func (r *Reader) listOffset(ctx context.Context, ts int64) (int64, error) {
	r.askForTopics()
	var off int64
	err := r.retrying(ctx, metrics.OpListOffsets, func(ctx context.Context) (err error) {
		off, err = r.listOffsetOnce(ctx, ts)
		return err
	}, engineTransient)
	return off, err
}

func (r *Reader) listOffsetOnce(ctx context.Context, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = r.isolation(ts)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = r.config.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = int32(r.config.Partition)
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.engine())
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return 0, kafkaError(fmt.Errorf("sdk: listing offsets of %s[%d]: %w", r.config.Topic, p.Partition, err))
		}
		return p.Offset, nil
	}
	return 0, fmt.Errorf("sdk: listing offsets of %s[%d]: the response has no partition", r.config.Topic, r.config.Partition)
}

// isolation is the isolation level of a ListOffsets request for the
// offset at ts (-1: the end, -2: the start): the Reader's for a time, 1
// under read_committed; read_uncommitted for the end, whose offset is then
// the high watermark as kafka-go lists it (and Lag counts to), not the
// last stable offset, which stops before an open transaction.
func (r *Reader) isolation(ts int64) int8 {
	if ts >= 0 && r.config.IsolationLevel == kafka.ReadCommitted {
		return 1
	}
	return 0
}
