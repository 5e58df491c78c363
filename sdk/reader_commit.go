package sdk

// reader_commit.go holds group mode's commits: CommitMessages (synchronous
// with CommitInterval 0, marks otherwise), the periodic commit of marks,
// and what a rebalance does to marks and buffered records (assigned,
// revoked, lost). It pairs with reader_fetch.go, which marks as it hands
// out with CommitInterval > 0.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/retry"
)

// assigned records the partitions the Reader now owns and calls the
// Assigned callback.
func (r *Reader) assigned(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
	r.rebalances.Add(1)
	r.mu.Lock()
	for t, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{t, p}
			if r.owned[tp] == nil {
				r.owned[tp] = newPartState()
			}
		}
	}
	r.mu.Unlock()
	// After the partitions are owned: a commit that sees the count grow
	// sees what the group gave (see keepOwned).
	r.assigns.Add(1)
	if f := r.s.rebalance.Assigned; f != nil {
		r.callBack(ctx, f, ps)
	}
}

// inCallback marks the ctx of a rebalance callback: the group waits for
// the callback, so a commit made with it cannot wait for a next
// generation (see commit).
type inCallback struct{}

// callBack runs a rebalance callback with a ctx that also ends after
// RebalanceTimeout, and marked as the callback's.
func (r *Reader) callBack(ctx context.Context, f func(context.Context, map[string][]int), ps map[string][]int32) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, inCallback{}, true), r.config.RebalanceTimeout)
	defer cancel()
	f(ctx, intPartitions(ps))
}

// intPartitions is ps with kafka-go's int partitions, for the callbacks.
func intPartitions(ps map[string][]int32) map[string][]int {
	out := make(map[string][]int, len(ps))
	for t, parts := range ps {
		for _, p := range parts {
			out[t] = append(out[t], int(p))
		}
		slices.Sort(out[t])
	}
	return out
}

// revoked calls the Revoked callback, commits the marks of the revoked
// partitions (CommitInterval > 0) and drops what is buffered of them.
func (r *Reader) revoked(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
	if f := r.s.rebalance.Revoked; f != nil && anyPartition(ps) {
		r.callBack(ctx, f, ps)
	}
	if r.config.CommitInterval > 0 {
		cctx, cancel := context.WithTimeout(ctx, r.config.RebalanceTimeout)
		if err := r.commitMarks(cctx, ps); err != nil {
			r.s.logger.Warn("azkafka: committing marked offsets of revoked partitions failed; their next owner reads from the previous commit (duplicates, no loss)",
				"error", err)
		}
		cancel()
	}
	r.drop(ps)
}

// lost calls the Lost callback and drops what is buffered of partitions
// lost with the membership.
func (r *Reader) lost(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
	if f := r.s.rebalance.Lost; f != nil && anyPartition(ps) {
		r.callBack(ctx, f, ps)
	}
	r.drop(ps)
}

// anyPartition reports whether ps names a partition. The engine calls
// its revoked and lost callbacks with none: lost after each failed attempt
// to rejoin (every backoff while the brokers are unreachable), revoked at
// Close after such a loss; the user's callbacks are not called for that.
func anyPartition(ps map[string][]int32) bool {
	for _, parts := range ps {
		if len(parts) > 0 {
			return true
		}
	}
	return false
}

func (r *Reader) drop(ps map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := map[topicPartition]bool{}
	for t, parts := range ps {
		for _, p := range parts {
			tp := topicPartition{t, p}
			gone[tp] = true
			delete(r.owned, tp)
			delete(r.ctl.rewind, tp)
			delete(r.ctl.sought, tp)
			if m := r.marksLocked()[t]; m != nil {
				r.dropMarkLocked(m, t, p)
			}
			if m := r.hooks.metrics; m != nil {
				m.released(t, p)
			}
		}
	}
	r.q.drop(func(tp topicPartition, _ int64) bool { return gone[tp] })
}

// dropMarkLocked drops the mark of partition p of topic t from m (t's
// marks) as the group takes the partition away: a mark still there was
// not committed (noteUnmarkedLocked). r.mu is held.
func (r *Reader) dropMarkLocked(m map[int32]kgo.EpochOffset, t string, p int32) {
	if o, ok := m[p]; ok {
		r.noteUnmarkedLocked(t, p, o.Offset)
		delete(m, p)
	}
}

// noteUnmarkedLocked notes that offset, marked for partition p of topic
// t, will not be committed: the group took the partition away first.
// r.mu is held.
func (r *Reader) noteUnmarkedLocked(t string, p int32, offset int64) {
	r.unmarked++
	r.s.logger.Warn("azkafka: a marked offset was not committed before the group took its partition away (the session expired, or the rebalance's commit failed); the partition's next owner reads from the group's previous commit (duplicates, no loss)",
		"group", r.config.GroupID, "topic", t, "partition", p, "offset", offset)
}

// unmarkedError is Close's error when marks were dropped uncommitted
// (noteUnmarkedLocked), else nil.
func (r *Reader) unmarkedError() error {
	r.mu.Lock()
	n := r.unmarked
	r.mu.Unlock()
	if n == 0 {
		return nil
	}
	return fmt.Errorf("sdk: Close: %d marked offsets were not committed before the group took their partitions away (the session expired, or a rebalance's commit failed): the messages read since the group's previous commit there are read again by the partitions' next owners", n)
}

// CommitMessages commits msgs like kafka.Reader.CommitMessages: for each
// partition the highest offset + 1. With CommitInterval 0 it waits for the
// commit, retrying transient errors and generation changes until ctx is
// done: a commit the group refused for its generation (a rebalance, or
// this member fenced and joining again) is made again, once the group has
// settled, only for the partitions the group gave this Reader back, past
// the offset the group had committed for them then (the others are not
// committed: their new owner reads them again from the group's offset).
// When that leaves nothing, it returns nil if the group's offsets are the
// commit's (an attempt the group took whose answer was lost), else the
// group's refusal (kafka.UnknownMemberId, kafka.IllegalGeneration,
// kafka.RebalanceInProgress, ...), as kafka-go's commit in a generation
// the group ended does, so that a retry never moves back what another
// member committed meanwhile (a commit of an old message made once the
// member is back in the group is taken, as kafka-go's is); with
// CommitInterval > 0 it marks the offsets for the next periodic commit.
// As kafka-go's, it commits the partitions of msgs whether or not the
// group gave them to this Reader (the broker takes a member's commit for
// any partition). Offsets of a topic or partition the cluster does not
// have are not retried, as no retry can commit them: the others are
// committed, and the error matches kafka.UnknownTopicOrPartition, as
// kafka-go's does; those of a fetched topic deleted since are dropped
// with a warning (Kafka takes kafka-go's commit of them). It returns an
// error without a GroupID, as kafka-go does, and io.ErrClosedPipe once
// Close has returned (kafka-go's blocks until ctx ends); during Close, a
// RebalanceCallbacks.Revoked function may still commit.
func (r *Reader) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	if !r.group {
		return errors.New("sdk: CommitMessages: unavailable when GroupID is not set")
	}
	if r.closeDone.Load() {
		return io.ErrClosedPipe
	}
	if len(msgs) == 0 {
		return nil
	}
	var offsets map[string]map[int32]kgo.EpochOffset
	r.mu.Lock()
	for _, m := range msgs {
		tp := topicPartition{m.Topic, int32(m.Partition)}
		if r.config.CommitInterval > 0 {
			raise(partitionsOf(r.marks, m.Topic), tp.partition, m.Offset+1)
			continue
		}
		if offsets == nil {
			offsets = map[string]map[int32]kgo.EpochOffset{}
		}
		raise(partitionsOf(offsets, m.Topic), tp.partition, m.Offset+1)
	}
	r.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return r.commit(ctx, offsets)
}

// commit commits offsets, retrying what is transient until ctx is done.
// A group's generation change is waited out too, but not with the ctx of
// a rebalance callback: the next generation waits for the callback.
func (r *Reader) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	waitGeneration := ctx.Value(inCallback{}) == nil
	var unknown, fenced error
	var last refusal
	var pin commitPin // the member and generation a commit after a refusal is for
	stop := false
	once := func(ctx context.Context) error {
		pinNow := false
		if fenced != nil {
			switch r.settleCommit(ctx, offsets, last) {
			case commitCovered:
				// The group's committed offsets, read since this
				// member was given the partitions again, are the
				// commit's (an earlier attempt of it whose answer
				// was lost took effect): done.
				return nil
			case commitNone:
				// The group moved on without this commit, or ctx
				// ended.
				stop = true
				return fenced
			}
			pinNow = true
		}
		// The assignments before the attempt, then its member and
		// generation (an assignment in between makes the next
		// refusal's wait shorter, never longer).
		assigns := r.assigns.Load()
		member, gen := r.engine().GroupMetadata()
		if pinNow {
			// What is left was decided for the generation that gave
			// this member its partitions back: a commit sent in a
			// later one would be decided again.
			pin = r.pinned(member, gen)
		}
		err := r.commitOnce(ctx, offsets, pin)
		for isUnknownTopic(err) && ctx.Err() == nil {
			// A topic or partition the cluster does not have (a
			// deleted topic, a partition past the topic's count): its
			// offsets cannot be committed, and waiting does not change
			// that. The cluster took the request's other partitions;
			// those of other topics are committed again without it. A
			// name or partition the cluster does not know is the call's
			// error, as kafka-go's; a deleted topic's ID (a topic this
			// Reader fetched) is not: Kafka takes kafka-go's commit of
			// it, by name.
			if unknown == nil && !errors.Is(err, kerr.UnknownTopicID) {
				unknown = err
			}
			if !r.dropDeleted(offsets, err) {
				return nil
			}
			err = r.commitOnce(ctx, offsets, pin)
		}
		if isGenerationChange(err) {
			// Each refusal waits for an assignment after it. (Under
			// KIP-848 Kafka takes a commit with an older member epoch
			// of the partitions the member still has; it refuses one
			// of a partition not the member's, or the member's only
			// since a later epoch, as STALE_MEMBER_EPOCH: the same
			// question as a classic generation's refusal.)
			fenced = err
			last = refusal{at: time.Now(), assigns: assigns, stale: errors.Is(err, kerr.StaleMemberEpoch), member: member, gen: gen}
		}
		return err
	}
	err := r.retrying(ctx, metrics.OpCommit, once, func(err error) bool {
		return !stop && (engineTransient(err) || waitGeneration && isGenerationChange(err))
	})
	if err != nil {
		return err
	}
	return unknown
}

// settleCommit waits until the group has settled after it refused a
// commit of offsets for its generation (a rebalance, or this member fenced
// and joining again), then keeps of offsets what is still this member's
// to commit (see keepOwned). It returns keepOwned's answer, commitNone
// too when ctx ends or the Reader closes meanwhile, never commitWait.
func (r *Reader) settleCommit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, rf refusal) int {
	for {
		if left := r.keepOwned(offsets, r.settled(rf), time.Since(rf.at) > r.rebalanceBound()); left != commitWait {
			return left
		}
		if retry.SleepContext(ctx, 20*time.Millisecond) != nil || r.closed.Load() {
			return commitNone
		}
	}
}

// refusal is a commit's refusal for its generation: when, the Reader's
// count of assignments before the attempt, and the member and generation
// it was made with.
type refusal struct {
	at      time.Time
	assigns int64
	stale   bool // KIP-848's STALE_MEMBER_EPOCH
	member  string
	gen     int32
}

// settled reports whether the Reader's partitions are known again since
// rf: the group assigned partitions since; or, for a stale member epoch,
// the member's epoch moved (a Kafka without KIP-1251's check of each
// partition refuses a commit whose epoch is not the member's latest, which
// moves at every change of the group, the member's partitions changed or
// not, and then the engine reports no assignment).
func (r *Reader) settled(rf refusal) bool {
	if r.assigns.Load() > rf.assigns {
		return true
	}
	if !rf.stale {
		return false
	}
	member, gen := r.engine().GroupMetadata()
	return gen > 0 && member == rf.member && gen != rf.gen
}

// What keepOwned leaves of a commit.
const (
	commitSome    = iota // offsets to commit
	commitWait           // the group is still settling: ask again
	commitNone           // something not this member's to commit, and nothing else left
	commitCovered        // nothing left: the group's committed offsets cover it all
)

// keepOwned decides what of a commit the group refused for its generation
// is still this member's to commit, once the group assigned partitions
// again since the refusal (reassigned): a partition the group gave it,
// whose committed offset the Reader has read since, keeps its offset if
// that is past the committed one (when every one is the committed one,
// the commit is covered: an attempt of it the group took before its
// answer was lost, say; one behind it is dropped: the group moved on
// without it); one it does not own is dropped. Late (after the
// rebalance's bound), what is not kept is dropped. Until then it waits,
// so that a commit through an ordinary rebalance goes on in the next
// generation, and a member fenced while another took its partitions never
// moves their offsets back.
func (r *Reader) keepOwned(offsets map[string]map[int32]kgo.EpochOffset, reassigned, late bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	wait, dropped := false, false
	for t, ps := range offsets {
		for p, eo := range ps {
			st := r.owned[topicPartition{t, p}]
			switch {
			case reassigned && st != nil && st.read:
				if eo.Offset <= st.committed {
					delete(ps, p)
					dropped = dropped || eo.Offset < st.committed
				}
			case late || reassigned && st == nil:
				delete(ps, p)
				dropped = true
			default:
				wait = true
			}
		}
		if len(ps) == 0 {
			delete(offsets, t)
		}
	}
	switch {
	case wait:
		return commitWait
	case len(offsets) > 0:
		return commitSome
	case dropped:
		return commitNone
	}
	return commitCovered
}

// rebalanceBound is how long a commit refused for its generation waits
// for the group to settle: the group's RebalanceTimeout (kafka-go's
// default 30 s when unset).
func (r *Reader) rebalanceBound() time.Duration {
	if d := r.config.RebalanceTimeout; d > 0 {
		return d
	}
	return 30 * time.Second
}

// dropDeleted removes from offsets the topics the cluster no longer has,
// err being the commit's error, and logs them once each. It reports
// whether offsets of other topics are left to commit.
func (r *Reader) dropDeleted(offsets map[string]map[int32]kgo.EpochOffset, err error) bool {
	var gone []string
	for t := range offsets {
		var ce *commitError
		if errors.As(err, &ce) && ce.topic != t {
			continue
		}
		gone = append(gone, t)
	}
	for _, t := range gone {
		delete(offsets, t)
		r.s.logger.Warn("azkafka: the cluster does not have the topic or partition; its offsets are not committed",
			"group", r.config.GroupID, "topic", t, "error", err)
	}
	return len(offsets) > 0
}

// commitOnce commits offsets once. When the Reader has fetched every
// topic of offsets (it knows their IDs), the OffsetCommit request goes
// straight to the group's coordinator with the group's current member
// and generation, written and read on the caller's goroutine over the
// Reader's own connection to the coordinator (coordConn): the engine's
// commit path adds its own bookkeeping of commits the Reader does not use
// (its autocommit is off), and its request path two goroutines a round
// trip. commitTurn keeps the commits in the order they are made, as the
// engine's path does. Other topics (CommitMessages may commit any
// partition, as kafka-go's does) go through the engine, which knows how
// to name a topic it has not fetched, and so does a commit the
// connection cannot carry (see coordConn).
func (r *Reader) commitOnce(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, pin commitPin) error {
	if req := r.commitRequest(offsets); req != nil {
		return r.commitDirect(ctx, req, offsets, pin)
	}
	return r.commitEngine(ctx, offsets, pin)
}

// commitPin is the member and generation a commit was decided for; the
// zero value pins none.
type commitPin struct {
	set bool
	// epochs: gen is KIP-848's member epoch, which moves at every change
	// of the group, the member's partitions changed or not (and Kafka
	// checks each partition of a commit against the member's).
	epochs bool
	member string
	gen    int32
}

// pinned pins a commit to member and generation gen.
func (r *Reader) pinned(member string, gen int32) commitPin {
	return commitPin{set: true, epochs: r.s.groupProtocol == GroupProtocolConsumer && !r.classicOnly.Load(), member: member, gen: gen}
}

// movedFrom reports whether a commit decided for pin must not be sent by
// member in generation gen: not in the group, another member ID (fenced
// and joined again), or (classic) another generation.
func (pin commitPin) movedFrom(member string, gen int32) bool {
	return pin.set && (gen <= 0 || member != pin.member || !pin.epochs && gen != pin.gen)
}

// errGenerationMoved is a commit's error when the group's generation is
// no longer the one it was decided for.
var errGenerationMoved = fmt.Errorf("sdk: the group's generation changed before the commit was sent: %w", kerr.IllegalGeneration)

// commitEngine commits offsets through the engine's commit path; pinned,
// only as the pinned member and generation (see movedFrom).
func (r *Reader) commitEngine(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, pin commitPin) error {
	if pin.movedFrom(r.engine().GroupMetadata()) {
		return errGenerationMoved
	}
	if pin.set {
		// The engine takes its member and generation when it sends,
		// after an earlier commit or a join it waits for.
		ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
			if pin.movedFrom(req.MemberID, req.Generation) {
				return errGenerationMoved
			}
			return nil
		})
	}
	var cerr error
	r.engine().CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		r.noteCommitted(offsets, resp, err)
		cerr = r.commitResult(resp, err)
	})
	return cerr
}

// commitResult is the error of a commit whose answer is resp and err:
// the request's, or the first partition's.
func (r *Reader) commitResult(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return kafkaError(fmt.Errorf("sdk: committing offsets of group %s: %w", r.config.GroupID, err))
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return &commitError{topic: t.Topic, err: kafkaError(fmt.Errorf("sdk: committing %s[%d] of group %s: %w", t.Topic, p.Partition, r.config.GroupID, err))}
			}
		}
	}
	return nil
}

// commitRequest is the OffsetCommit request of offsets, naming each topic
// by its name and its ID (the request's version uses one of them), or nil
// when the ID of a topic is unknown.
func (r *Reader) commitRequest(offsets map[string]map[int32]kgo.EpochOffset) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = r.config.GroupID
	req.Topics = make([]kmsg.OffsetCommitRequestTopic, 0, len(offsets))
	r.mu.Lock()
	for t, ps := range offsets {
		id, ok := r.topicIDs[t]
		if !ok {
			r.mu.Unlock()
			return nil
		}
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = t, id
		rt.Partitions = make([]kmsg.OffsetCommitRequestTopicPartition, 0, len(ps))
		for p, eo := range ps {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, eo.Offset, eo.Epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	r.mu.Unlock()
	return req
}

// commitDirect sends req, the commit of offsets, to the group's
// coordinator on the Reader's own connection, or else through the engine
// (see commitOnce).
func (r *Reader) commitDirect(ctx context.Context, req *kmsg.OffsetCommitRequest, offsets map[string]map[int32]kgo.EpochOffset, pin commitPin) error {
	cl := r.engine()
	select {
	case r.commitTurn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.commitTurn }()
	req.MemberID, req.Generation = cl.GroupMetadata()
	if pin.movedFrom(req.MemberID, req.Generation) {
		return errGenerationMoved
	}
	if req.Generation <= 0 || req.MemberID == "" {
		// Not (or no longer, or not yet again) in the group: the
		// engine's path waits for the join, or says why there is none.
		return r.commitEngine(ctx, offsets, pin)
	}
	resp, err := r.coordCommit(ctx, req)
	if errors.Is(err, errCoordConn) {
		return r.commitEngine(ctx, offsets, pin)
	}
	if err == nil {
		// A v10+ response names its topics by ID only.
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.Topic == "" {
				for _, rt := range req.Topics {
					if rt.TopicID == t.TopicID {
						t.Topic = rt.Topic
					}
				}
			}
		}
	}
	r.noteCommitted(offsets, resp, err)
	return r.commitResult(resp, err)
}

// commitMarks commits the marked offsets of the partitions in only (all
// when only is nil) and forgets them. A failed commit puts them back for
// the next one, but for the partitions the Reader no longer owns and those
// Seek moved meanwhile: Seek forgot their marks, and putting back one
// taken before a seek back would commit past the messages it re-reads.
func (r *Reader) commitMarks(ctx context.Context, only map[string][]int32) error {
	r.mu.Lock()
	moves := r.moves
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range r.marksLocked() {
		for p, o := range ps {
			if only != nil && !containsPartition(only[t], p) {
				continue
			}
			if offsets[t] == nil {
				offsets[t] = map[int32]kgo.EpochOffset{}
			}
			offsets[t][p] = o
			delete(ps, p)
		}
	}
	r.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	err := r.commitOnce(ctx, offsets, commitPin{})
	if err != nil {
		// Keep them for the next try, unless newer marks came meanwhile
		// (raise keeps the higher), or the partition was lost or sought.
		r.mu.Lock()
		for t, ps := range offsets {
			for p, o := range ps {
				tp := topicPartition{t, p}
				if r.ctl.sought[tp] > moves {
					continue
				}
				if _, owned := r.owned[tp]; !owned {
					r.noteUnmarkedLocked(t, p, o.Offset)
					continue
				}
				raise(partitionsOf(r.marks, t), p, o.Offset)
			}
		}
		r.mu.Unlock()
	}
	return err
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// commitLoop commits the marks every CommitInterval until Close, which
// ends a commit in flight (Close commits the marks itself).
func (r *Reader) commitLoop() {
	defer close(r.commitDone)
	t := time.NewTicker(r.config.CommitInterval)
	defer t.Stop()
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.commitStop:
			cancel()
		case <-stop.Done():
		}
	}()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(stop, max(r.config.CommitInterval, 5*time.Second))
			if err := r.commitMarks(ctx, nil); err != nil && stop.Err() == nil {
				r.absorb(metrics.OpCommit, err)
			}
			cancel()
		}
	}
}

// partitionsOf returns m's offsets of topic, made when missing.
func partitionsOf(m map[string]map[int32]kgo.EpochOffset, topic string) map[int32]kgo.EpochOffset {
	ps := m[topic]
	if ps == nil {
		ps = map[int32]kgo.EpochOffset{}
		m[topic] = ps
	}
	return ps
}

// raise sets the offset to commit of partition to next, unless a higher one
// is there.
func raise(ps map[int32]kgo.EpochOffset, partition int32, next int64) {
	if cur, ok := ps[partition]; !ok || next > cur.Offset {
		ps[partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
	}
}
