package sdk

// reader_fetch.go holds the Reader's reads: ReadMessage and FetchMessage,
// the buffer of records polled from the engine, a record as kafka-go's
// Message, what each poll's errors mean for the caller, and the ctx's
// error naming the last cause. It pairs with reader.go (the Reader and
// its engine), reader_commit.go (group mode's commits) and
// reader_partition.go (partition mode's position).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/retry"
)

// ReadMessage reads the next message and, with a consumer group, commits
// it, like kafka.Reader.ReadMessage. When the fetch succeeded but the
// commit did not (ctx done, or an error that is not transient), it returns
// the message together with the error, so that the caller can still
// process it (kafka-go drops it): the commit may have been stored.
func (r *Reader) ReadMessage(ctx context.Context) (m kafka.Message, err error) {
	if r.group && r.config.CommitInterval == 0 {
		// A commit per message: its round trip outweighs all else.
		return r.readCommit(ctx)
	}
	// Marking (group mode) needs no round trip: hand out and mark under
	// one lock.
	f, err := r.next(ctx, r.group, false)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("fetching message: %w", err)
	}
	// setMessage's stores, made here to the result itself: stores to the
	// stack need no write barrier, which the garbage collector's marking
	// (busy while records arrive) makes a cost on every message, and
	// returning a Message built elsewhere costs a copy.
	rec := f.rec
	m.Topic = rec.Topic
	m.Partition = int(rec.Partition)
	m.Offset = rec.Offset
	m.HighWaterMark = f.hwm
	m.Key = orNil(rec.Key)
	m.Value = orNil(rec.Value)
	m.Time = messageTime(rec.Timestamp)
	if len(rec.Headers) > 0 {
		m.Headers = headers(rec.Headers)
	}
	rec.Recycle()
	return m, nil
}

// readCommit is ReadMessage with a synchronous commit of each message.
//
// Concurrent calls hand out messages in order but reach the commit in any
// order: the commit of an earlier message of a partition made after a
// later one's would move the group's offset back, and a restart would
// read again what was read. So these commits are made one at a time, and
// one that a commit already made covers (a higher offset of the same
// partition, in the same generation of the group) is not made again: the
// message is committed.
//
// A transaction marker passed over is committed too, as kafka-go's
// ReadMessage commits the marker it hands out: the group's offset of a
// partition whose log ends with one is then its end (no lag).
func (r *Reader) readCommit(ctx context.Context) (kafka.Message, error) {
	for {
		f, err := r.next(ctx, false, true)
		if err != nil {
			return kafka.Message{}, fmt.Errorf("fetching message: %w", err)
		}
		marker := f.rec.Attrs.IsControl()
		var m kafka.Message
		setMessage(&m, f)
		f.rec.Recycle()
		err = r.commitRead(ctx, m, f.moves)
		switch {
		case !marker:
			return m, err
		case err != nil && ctx.Err() != nil:
			// Nothing was handed out: the call ends as a fetch that
			// ctx ended does.
			return kafka.Message{}, fmt.Errorf("fetching message: %w", ctx.Err())
		case err != nil:
			// The next message's commit covers the marker; a refusal
			// that lasts is that commit's error.
			r.s.logger.Debug("azkafka: the commit past a transaction marker failed; the next message's commit covers it",
				"group", r.config.GroupID, "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "error", err)
		}
	}
}

// commitRead commits m, handed out by readCommit when Reader.moves was
// moves, unless a commit made already covers it.
func (r *Reader) commitRead(ctx context.Context, m kafka.Message, moves uint64) error {
	rc := &r.readCommits
	select {
	case rc.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("committing message: %w", ctx.Err())
	}
	defer func() { <-rc.turn }()
	_, gen := r.engine().GroupMetadata()
	tp := topicPartition{m.Topic, int32(m.Partition)}
	if rc.covered(gen, tp, m.Offset) {
		return nil
	}
	if err := r.CommitMessages(ctx, m); err != nil {
		return fmt.Errorf("committing message: %w", err)
	}
	// moves: a message handed out before a Seek that commits after it
	// does not set the floor of the messages the Seek made read again.
	rc.note(gen, tp, m.Offset+1, moves)
	return nil
}

// readCommits is what readCommit committed in the group's generation gen:
// the next offset of each partition (Seek forgets a partition's).
type readCommits struct {
	turn  chan struct{} // of capacity 1: held while a commit is made
	mu    sync.Mutex
	gen   int32
	done  map[topicPartition]int64
	moves uint64 // Reader.moves at the last Seek: a commit of a message handed out before it is not noted
}

// covered reports whether a commit made in generation gen already passed
// offset of tp.
func (rc *readCommits) covered(gen int32, tp topicPartition, offset int64) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if gen != rc.gen {
		rc.gen, rc.done = gen, nil
	}
	o, ok := rc.done[tp]
	return ok && o > offset
}

// note records next, tp's committed offset in generation gen, unless the
// message was handed out (when Reader.moves was moves) before the last
// Seek.
func (rc *readCommits) note(gen int32, tp topicPartition, next int64, moves uint64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if gen != rc.gen || moves != rc.moves {
		return
	}
	if rc.done == nil {
		rc.done = map[topicPartition]int64{}
	}
	rc.done[tp] = next
}

// forget drops what was committed of tp (a Seek moved it; moves is
// Reader.moves after it).
func (rc *readCommits) forget(tp topicPartition, moves uint64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.moves = max(rc.moves, moves)
	delete(rc.done, tp)
}

// FetchMessage returns the next message without committing it, like
// kafka.Reader.FetchMessage. It blocks until a message is there, ctx is
// done (see Reader for the error then), the Reader is closed (io.EOF), or
// an error waiting cannot fix.
func (r *Reader) FetchMessage(ctx context.Context) (m kafka.Message, err error) {
	f, err := r.next(ctx, false, false)
	if err != nil {
		return kafka.Message{}, err
	}
	setMessage(&m, f)
	f.rec.Recycle()
	return m, nil
}

// next hands out the next record, polling the engine when none is
// queued; with mark, it also marks the record's offset for the next
// periodic commit (a record handed out under the lock is of a partition
// the Reader owns: drop removes the others' under the same lock). A
// transaction marker moves the position (and with mark, the mark) of its
// partition past it, as Kafka's consumer does, and is handed out only
// with markers and when it is the last its poll returned of its partition
// (readCommit commits it; the caller sees none; a record after it would
// commit past it anyway).
func (r *Reader) next(ctx context.Context, mark, markers bool) (fetched, error) {
	start := r.hooks.errSeq.Load()
	for {
		if r.closed.Load() {
			return fetched{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			// Nothing is handed out on an ended ctx: the message stays
			// for the next call (kafka-go's returns ctx's error at least
			// when no message is ready).
			return fetched{}, r.ctxError(ctx, start)
		}
		r.mu.Lock()
		if f, ok := r.q.next(); ok {
			marker := f.rec.Attrs.IsControl()
			if !marker {
				n := int64(len(f.rec.Key) + len(f.rec.Value))
				r.handed++
				r.handedBytes += n
				r.pollBytes += n
			}
			if r.q.empty() {
				r.closePollLocked()
			}
			if mark {
				r.markLocked(f)
			}
			f.moves = r.moves
			if r.group {
				f.st.position = f.rec.Offset + 1
			} else {
				r.offset = f.rec.Offset + 1
				r.lag = max(f.hwm-r.offset, 0)
			}
			r.mu.Unlock()
			if marker && !(markers && f.tail) {
				f.rec.Recycle()
				continue
			}
			return f, nil
		}
		r.mu.Unlock()
		if err := r.poll(ctx, start); err != nil {
			return fetched{}, err
		}
		if r.refused.Load() != 0 {
			r.refused.Store(0)
			r.waits.Store(0)
		}
	}
}

// markLocked marks the offset after f's for the next commit, unless a
// higher mark is there: in r.pend while f continues a run of its
// partition's messages. r.mu is held.
func (r *Reader) markLocked(f fetched) {
	if r.pend.st != f.st {
		r.flushMarkLocked()
		r.pend = pendingMark{st: f.st, topic: f.rec.Topic, partition: f.rec.Partition, next: f.rec.Offset + 1}
		return
	}
	r.pend.next = max(r.pend.next, f.rec.Offset+1)
}

// flushMarkLocked moves r.pend into r.marks. r.mu is held.
func (r *Reader) flushMarkLocked() {
	if r.pend.st != nil {
		raise(partitionsOf(r.marks, r.pend.topic), r.pend.partition, r.pend.next)
		r.pend = pendingMark{}
	}
}

// marksLocked is r.marks, with r.pend in it. r.mu is held.
func (r *Reader) marksLocked() map[string]map[int32]kgo.EpochOffset {
	r.flushMarkLocked()
	return r.marks
}

// message converts a record to kafka-go's Message.
func message(f fetched) kafka.Message {
	var m kafka.Message
	setMessage(&m, f)
	return m
}

// setMessage sets m, a zero Message, to the record f.
func setMessage(m *kafka.Message, f fetched) {
	rec := f.rec
	m.Topic = rec.Topic
	m.Partition = int(rec.Partition)
	m.Offset = rec.Offset
	m.HighWaterMark = f.hwm
	m.Key = orNil(rec.Key)
	m.Value = orNil(rec.Value)
	m.Time = messageTime(rec.Timestamp)
	if len(rec.Headers) > 0 {
		m.Headers = headers(rec.Headers)
	}
}

// headers converts a record's headers to kafka-go's.
func headers(hs []kgo.RecordHeader) []kafka.Header {
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		out[i] = kafka.Header{Key: h.Key, Value: orNil(h.Value)}
	}
	return out
}

// orNil is b, or nil when it is empty: kafka-go's Reader hands out an
// empty key, value or header value as nil.
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// messageTime is a record's timestamp as kafka-go's Reader gives it: in
// UTC, and the zero Time for a timestamp at or before the epoch.
func messageTime(t time.Time) time.Time {
	if t.UnixMilli() <= 0 {
		return time.Time{}
	}
	// The engine's timestamps are whole milliseconds, with no monotonic
	// reading: in UTC, they are kafka-go's time.UnixMilli(ms).UTC().
	return t.UTC()
}

// poll refills the buffer from the engine, or returns why it could not.
func (r *Reader) poll(ctx context.Context, mark int64) error {
	r.mu.Lock()
	gate := r.pollGate
	r.mu.Unlock()
	if gate != nil {
		// A Seek (or SetOffset) waits for the poller's turn: it goes
		// first.
		select {
		case <-gate:
		case <-ctx.Done():
			return r.ctxError(ctx, mark)
		}
	}
	select {
	case r.pollSem <- struct{}{}:
	case <-ctx.Done():
		return r.ctxError(ctx, mark)
	}
	defer func() { <-r.pollSem }()
	r.hooks.rearm()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	if !r.q.empty() || r.closed.Load() {
		r.mu.Unlock()
		return nil // another caller's poll filled it, or Close ran
	}
	moves := r.moves
	r.pollCancel = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.pollCancel = nil
		r.mu.Unlock()
	}()
	if r.refused.Load() == moves+1 {
		// The last poll at this position was refused as out of range
		// and returned nothing: ask again after a backoff (kafka-go's
		// reader backs off too), which SetOffset, Seek and Close
		// interrupt as they do a poll.
		if err := retry.SleepContext(pctx, r.waitBackoff()); err != nil {
			return r.interrupted(ctx, pctx, mark, err)
		}
	}
	if err := r.hooks.fatalError(); err != nil {
		return err
	}
	r.askForTopics()
	started, err := r.start(pctx)
	if err == nil && !started {
		// The offset is past the partition's end: wait for the log to
		// reach it, as kafka-go does, checking again after a backoff.
		err = retry.SleepContext(pctx, r.waitBackoff())
	}
	if err != nil || !started {
		r.noteRefused(err, moves, 0)
		return r.interrupted(ctx, pctx, mark, err)
	}
	r.checkGroupProtocol(pctx)
	fast := !r.fullFetch.Load() && r.readsFast()
	fs := r.engine().PollRecords(pctx, r.pollMax)

	r.mu.Lock()
	r.closePollLocked() // the last poll's rest may have been dropped
	r.q.reset()
	var n int64
	rewound := false
	for _, f := range fs {
		for _, t := range f.Topics {
			if t.TopicID != ([16]byte{}) && r.topicIDs[t.Topic] != t.TopicID {
				r.topicIDs[t.Topic] = t.TopicID
			}
			for i := range t.Partitions {
				kept, rw := r.keepLocked(kgo.FetchTopicPartition{Topic: t.Topic, FetchPartition: t.Partitions[i]}, moves)
				n, rewound = n+kept, rewound || rw
			}
		}
	}
	r.pollOpen = n > 0
	r.mu.Unlock()
	if rewound {
		r.applyRewinds()
	}
	if n > 0 {
		if fast {
			r.raiseFetchLimits()
		}
		r.polled = polled{at: time.Now(), n: n}
		r.stats.fetchSize.observe(n)
	}
	waitRange, err := r.pollErrors(ctx, mark, fs.Errors())
	if err != nil {
		r.noteRefused(err, moves, n)
		return err
	}
	if n > 0 {
		r.waits.Store(0)
	} else if waitRange {
		// Only a partition out of range answered (see outOfRange):
		// ask again after a backoff, as kafka-go's reader does.
		err = retry.SleepContext(pctx, r.waitBackoff())
	}
	return r.interrupted(ctx, pctx, mark, err)
}

// noteRefused paces the next poll (Reader.refused) when this one, made at
// Reader.moves moves, returned n records and err, kafka.OffsetOutOfRange
// with OffsetOutOfRangeError: when it returned records too (a group's
// other partitions), the next poll is not held back.
func (r *Reader) noteRefused(err error, moves uint64, n int64) {
	if n == 0 && r.config.OffsetOutOfRangeError && errors.Is(err, kafka.OffsetOutOfRange) {
		r.refused.Store(moves + 1)
	}
}

// polled is a poll that returned records: when, and how many.
type polled struct {
	at time.Time
	n  int64
}

// fastRecord is the most time a caller may spend per record for the
// Reader's fetches to grow past their first 64 KiB: beyond it, the
// requests of small fetches cost the caller less than 1% of its time.
const fastRecord = 10 * time.Microsecond

// readsFast reports whether the caller reads fast (see fast) since the
// last poll that returned records. poll's own.
func (r *Reader) readsFast() bool {
	if r.polled.n == 0 {
		return false // the first records: before them nothing is buffered
	}
	return fast(r.polled.n, time.Since(r.polled.at), r.engine().BufferedFetchRecords())
}

// fast reports whether a caller that got through n records in elapsed,
// the engine holding buffered records more, reads fast: it has caught up
// with the engine's fetches (nothing buffered), or took less than
// fastRecord a record.
func fast(n int64, elapsed time.Duration, buffered int64) bool {
	return buffered == 0 || elapsed < time.Duration(n)*fastRecord
}

// raiseFetchLimits sets the engine's fetch limits from the first 64 KiB
// to the configured ones (MaxBytes per partition, readerFetchMax per
// broker) once the caller reads fast (readsFast). A slower caller (a
// commit per message) keeps them small: the engine holds and decodes
// ahead of it one small response per broker, not megabytes it may never
// read (a rebalance or Close drops them).
func (r *Reader) raiseFetchLimits() {
	if r.fullFetch.CompareAndSwap(false, true) {
		r.engine().UpdateFetchMaxBytes(int32(readerFetchMax(r.config)), int32(r.config.MaxBytes))
	}
}

// keepLocked queues the records of p that poll keeps, and returns how
// many messages (transaction markers are not), and whether a pause
// dropped them for a rewind. Dropped: those of a
// partition the Reader no longer owns (group mode), moved by SetOffset or
// Seek while the poll ran (moves is Reader.moves when it began), or
// paused meanwhile. r.mu is held.
func (r *Reader) keepLocked(p kgo.FetchTopicPartition, moves uint64) (n int64, rewound bool) {
	if len(p.Records) == 0 {
		return 0, false
	}
	tp := topicPartition{p.Topic, p.Partition}
	var st *partState
	if r.group {
		// A partition revoked while this poll ran and owned again was
		// restarted by the engine at the committed offset: these
		// records are the new start, keep them. Only those of a
		// partition the Reader no longer owns go.
		var ok bool
		if st, ok = r.owned[tp]; !ok {
			return 0, false
		}
		st.hwm = max(st.hwm, p.HighWatermark)
		if st.floor > 0 {
			// Below a committed offset that was past the log's end
			// (adjustOffsets): kafka-go never hands these out.
			i := 0
			for i < len(p.Records) && p.Records[i].Offset < st.floor {
				i++
			}
			if p.Records = p.Records[i:]; len(p.Records) == 0 {
				return 0, false
			}
			st.floor = 0
		}
	} else if moves != r.moves {
		return 0, false // moved by SetOffset while this poll ran
	}
	if r.ctl.sought[tp] > moves {
		return 0, false // moved by Seek while this poll ran
	}
	if r.pausedLocked(tp) {
		// Paused while this poll ran: hand these out after Resume.
		r.noteRewindLocked(tp, p.Records[0].Offset)
		return 0, true
	}
	r.q.push(p.Records, p.HighWatermark, st)
	for _, rec := range p.Records {
		if !rec.Attrs.IsControl() {
			n++
		}
	}
	if m := r.s.rec; m != nil {
		bytes := 0
		for _, rec := range p.Records {
			if !rec.Attrs.IsControl() {
				bytes += len(rec.Key) + len(rec.Value)
			}
		}
		lag := max(p.HighWatermark-p.Records[len(p.Records)-1].Offset-1, 0)
		m.Consumed(p.Topic, p.Partition, int(n), bytes, lag)
	}
	return n, false
}

// closePollLocked gives stats.fetchBytes the bytes handed out of the last
// poll, once. r.mu is held.
func (r *Reader) closePollLocked() {
	if r.pollOpen {
		r.stats.fetchBytes.observe(r.pollBytes)
		r.pollOpen, r.pollBytes = false, 0
	}
}

// interrupted is what a poll whose own ctx (pctx, of the caller's ctx)
// may have ended returns, err being what it met: nil when SetOffset moved
// the reader (the caller polls again), io.EOF after Close, the refusal
// that interrupted it, or the caller's ctx's error.
func (r *Reader) interrupted(ctx, pctx context.Context, mark int64, err error) error {
	cause := context.Cause(pctx)
	switch {
	case r.closed.Load():
		return io.EOF
	case ctx.Err() != nil:
		return r.ctxError(ctx, mark)
	case cause != nil && cause != context.Canceled:
		return cause // a refusal interrupted the poll
	case cause != nil:
		return nil // SetOffset
	}
	return err
}

// waitBackoff is the wait before checking again whether the log reached
// the offset the reader waits for: kafka-go's read backoff, doubling from
// ReadBackoffMin to ReadBackoffMax.
func (r *Reader) waitBackoff() time.Duration {
	b := retry.Backoff{Min: r.config.ReadBackoffMin, Max: r.config.ReadBackoffMax}
	return b.Ceiling(int(r.waits.Add(1) - 1))
}

// checkGroupProtocol reads, once, whether the cluster has KIP-848's
// consumer protocol when the Reader asked for it: without it the engine
// runs a classic group with its own assignor (not the GroupBalancers, so
// kafka-go members cannot share the group); the Reader says so once and
// Stats reports classic.
func (r *Reader) checkGroupProtocol(ctx context.Context) {
	if !r.group || r.s.groupProtocol != GroupProtocolConsumer || r.protocolChecked.Load() {
		return
	}
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, r.engine())
	if err != nil {
		return // the next poll asks again
	}
	r.protocolChecked.Store(true)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) && k.MaxVersion >= 1 {
			return
		}
	}
	r.classicOnly.Store(true)
	r.s.logger.Warn("azkafka: the cluster lacks KIP-848's consumer group protocol (Kafka 4.0+): the group runs the classic protocol with the engine's own assignor, which kafka-go members cannot join",
		"group", r.config.GroupID, "fix", "upgrade the brokers, or use the classic protocol ("+EnvGroupProtocol+"=classic)")
}

// interrupt ends the poll in flight with err as its cause.
func (r *Reader) interrupt(err error) {
	r.mu.Lock()
	if r.pollCancel != nil {
		r.pollCancel(err)
	}
	r.mu.Unlock()
}

// pollErrors decides what the errors of one poll mean for the caller;
// waitRange reports that a partition out of range waits (outOfRange).
func (r *Reader) pollErrors(ctx context.Context, mark int64, errs []kgo.FetchError) (waitRange bool, _ error) {
	for _, fe := range errs {
		err := fe.Err
		switch {
		case errors.Is(err, kgo.ErrClientClosed) || r.closed.Load():
			return false, io.EOF
		case ctx.Err() != nil:
			return false, r.ctxError(ctx, mark)
		case errors.Is(err, context.Canceled):
			continue // SetOffset interrupted the poll
		}
		if fe.Topic != "" && errors.Is(err, kerr.OffsetOutOfRange) {
			switch r.outOfRange(ctx, fe.Topic, fe.Partition) {
			case rangeMoved:
				continue
			case rangeWait:
				waitRange = true
				continue
			}
		}
		var loss *kgo.ErrDataLoss
		if errors.As(err, &loss) {
			r.s.logger.Warn("azkafka: the broker lost data the Reader had read; it resumes where the broker's log now is",
				"topic", fe.Topic, "partition", fe.Partition, "error", err)
			continue
		}
		if !isGenerationChange(err) {
			r.stats.errors.Add(1)
		}
		if fe.Topic != "" && errors.Is(err, kerr.UnknownTopicID) {
			r.checkRecreated(ctx, fe.Topic)
		}
		if fe.Topic != "" {
			err = fmt.Errorf("sdk: %s[%d]: %w", fe.Topic, fe.Partition, err)
		}
		err = kafkaError(err)
		if engineTransient(fe.Err) || isGenerationChange(fe.Err) {
			// A generation change (the member fenced, removed or
			// rejoining) is the engine's to recover: it joins again,
			// as kafka-go's Reader does without a word to the caller.
			r.absorb(metrics.OpFetch, err)
			continue
		}
		return false, err
	}
	return waitRange, nil
}

// What outOfRange made of a partition's offset out of range.
type rangeAnswer int

const (
	rangeError rangeAnswer = iota // the caller's error (OffsetOutOfRangeError)
	rangeMoved                    // the engine goes on from the log's start
	rangeWait                     // the engine asks again at the same offset
)

// outOfRange handles a fetch of partition p of topic the broker answered
// OFFSET_OUT_OF_RANGE, as kafka-go's reader does: it lists the log's start
// and end; when the offset the Reader hands out next there is below the
// start (retention or DeleteRecords removed the records it was reading,
// or a group's committed offset), the engine goes on from the start, with
// OffsetOutOfRangeError too; past the end it waits for the log to reach
// it (with OffsetOutOfRangeError, the caller gets the error); within the
// log (a broker that answered out of range for an offset it has) it asks
// again at the same offset. The engine never moves a partition by itself
// (NoResetOffset): it would go back to the log's start, handing out again
// what the Reader had read.
func (r *Reader) outOfRange(ctx context.Context, topic string, p int32) rangeAnswer {
	oore := r.config.OffsetOutOfRangeError
	wait := rangeWait
	if oore {
		wait = rangeError
	}
	tp := topicPartition{topic, p}
	r.mu.Lock()
	next, known := r.offset, true
	if r.group {
		st := r.owned[tp]
		if st == nil {
			r.mu.Unlock()
			return wait // not the Reader's any more
		}
		next = st.next()
		// Nothing known: the engine started the partition at the
		// log's start or end (StartOffset).
		known = next >= 0 || r.config.StartOffset != kafka.LastOffset
	} else if next == kafka.LastOffset {
		known = false // started at the end
	}
	r.mu.Unlock()
	starts, err := r.listOffsets(ctx, []topicPartition{tp}, -2)
	if err != nil {
		return wait
	}
	ends, err := r.listOffsets(ctx, []topicPartition{tp}, -1)
	if err != nil {
		return wait
	}
	start, ok1 := starts[tp]
	end, ok2 := ends[tp]
	switch {
	case !ok1 || !ok2 || start < 0 || end < 0:
		return wait
	case known && next < start:
		r.engine().SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {p: {Epoch: -1, Offset: start}}})
		r.s.logger.Warn("azkafka: the records the Reader was to read next were deleted (retention or DeleteRecords); it goes on from the start of the partition's log, as kafka-go's does",
			"topic", topic, "partition", p, "next", next, "start", start)
		return rangeMoved
	case !known || next >= end:
		return wait
	}
	r.s.logger.Warn("azkafka: the broker answered a fetch as out of range for an offset its log has; the Reader asks again at the same offset, as kafka-go's does",
		"topic", topic, "partition", p, "next", next, "start", start, "end", end)
	return rangeWait
}

// checkRecreated asks the cluster, at most once a second, for topic,
// which the engine fetches by an ID the cluster no longer knows: when the
// cluster has the topic under another ID, it was deleted and created
// again, which the engine refuses for good. The engine then forgets the
// topic and consumes it anew, as kafka-go's Reader, which reads by name,
// goes on: at the same position in partition mode (see start), at the
// group's committed offsets in a group.
func (r *Reader) checkRecreated(ctx context.Context, topic string) {
	r.mu.Lock()
	known, ok := r.topicIDs[topic]
	if !ok || time.Since(r.recreateChecked) < time.Second {
		r.mu.Unlock()
		return
	}
	r.recreateChecked = time.Now()
	r.mu.Unlock()
	mctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	resp, err := metadataRequest(topic).RequestWith(mctx, r.engine())
	if err != nil {
		return
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic || t.ErrorCode != 0 || t.TopicID == ([16]byte{}) || t.TopicID == known {
			continue
		}
		cl := r.engine()
		cl.PurgeTopicsFromClient(topic)
		r.mu.Lock()
		delete(r.topicIDs, topic)
		if !r.group {
			r.started = false // start adds the partition again
		}
		r.mu.Unlock()
		if r.group {
			cl.AddConsumeTopics(topic)
		}
		r.s.logger.Info("azkafka: the topic was deleted and created again; the Reader reads the new one",
			"topic", topic, "group", r.config.GroupID)
	}
}

// retrying runs once until it succeeds, waiting out the errors again
// reports as worth it with the retry policy's backoff (each absorbed: see
// absorb). It returns nil, an error not worth waiting (or any error after
// Close), or ctx's error naming the last cause. While the client has
// never reached its cluster, every error is waited out until the
// bootstrap gives up (DefaultBootstrapTimeout, or every address refused
// so that no retry helps): then its *BootstrapError.
func (r *Reader) retrying(ctx context.Context, op metrics.Op, once func(context.Context) error, again func(error) bool) error {
	if !r.hooks.boot.reached.Load() {
		r.hooks.rearm() // a call after one that gave up tries again
	}
	mark := r.hooks.errSeq.Load()
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(nil)
		reached := r.hooks.boot.reached.Load()
		if !reached {
			// Never reached the cluster: an attempt lasts until the
			// bootstrap gives up, which decides when the call does (a
			// *BootstrapError), as FetchMessage does, or at most the
			// bootstrap's timeout (which runs from the first dial, a
			// little after the attempt began: the next attempt is the
			// one the give-up ends).
			limit := r.hooks.boot.timeout
			if r.attemptLimit != 0 {
				limit = r.attemptLimit
			}
			actx, cancel = context.WithTimeout(ctx, limit)
			over := r.hooks.boot.overSignal()
			go func() {
				select {
				case <-over:
					cancel()
				case <-actx.Done():
				}
			}()
		}
		err := once(actx)
		if cancel != nil {
			cancel()
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return r.ctxError(ctx, mark)
		case r.closed.Load():
			return err
		}
		if !reached && !r.hooks.boot.reached.Load() {
			if ferr := r.hooks.fatalError(); ferr != nil {
				return ferr
			}
			if gerr := r.hooks.boot.gaveUpError(); gerr != nil {
				// Given up, and a connection made since cleared the
				// refusal: the give-up still ends the call.
				return gerr
			}
		} else if !again(err) {
			return err
		}
		r.absorb(op, err)
		if r.s.retry.Sleep(ctx, attempt) != nil {
			return r.ctxError(ctx, mark)
		}
	}
}

// absorb counts, remembers and logs (rate-limited) a transient error the
// Reader waits out.
func (r *Reader) absorb(op metrics.Op, err error) {
	r.counters.retries.Add(1)
	if r.s.rec != nil {
		r.s.rec.Retried(op)
	}
	r.hooks.noteError(fmt.Errorf("%s: %w", opText[op], err))
}

// opText names a Reader operation in errors.
var opText = [...]string{metrics.OpFetch: "fetch", metrics.OpCommit: "commit", metrics.OpListOffsets: "list offsets"}

// ctxError is ctx's error, naming the last error absorbed since mark.
func (r *Reader) ctxError(ctx context.Context, mark int64) error {
	err := newCtxError(ctx, r.hooks.since(mark))
	if errors.Is(err, context.DeadlineExceeded) {
		r.stats.timeouts.Add(1)
	}
	return err
}
