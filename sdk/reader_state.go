package sdk

// reader_state.go holds what kafka-go's Reader cannot say in group mode:
// each owned partition's committed offset, position, high watermark and
// lag (Assignment, and Lag, Offset, ReadLag and Stats through them), and
// the Reader's health (Health). It pairs with reader_fetch.go, which
// moves positions and high watermarks as it polls and hands out, and
// reader_commit.go, which records commits and ownership.

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/metrics"
)

// partState is what a group Reader knows of a partition it owns; -1 is
// unknown. Guarded by Reader.mu.
type partState struct {
	committed int64 // the group's committed offset
	// read: committed holds what the group had when the partition was
	// assigned (the engine's offset fetch answered for it).
	read     bool
	position int64 // the next offset the Reader hands out
	hwm      int64 // the high watermark of the latest fetch or ReadLag
	// start is where the Reader starts without a committed offset
	// (StartOffset: the log's start or end), as ReadLag listed it.
	start int64
	// floor, when above 0, is a committed offset that was past the end
	// of the log when the partition was assigned: the engine reads from
	// the end, and records below floor are not handed out (kafka-go waits
	// at the committed offset).
	floor int64
}

func newPartState() *partState { return &partState{committed: -1, position: -1, hwm: -1, start: -1} }

// next is the offset the Reader hands out next: its position, else the
// committed offset it starts from, else the start ReadLag listed; -1 when
// none is known.
func (p *partState) next() int64 {
	switch {
	case p.position >= 0:
		return p.position
	case p.committed >= 0:
		return p.committed
	}
	return p.start
}

// lag is the high watermark less next, at least 0; -1 when either is
// unknown.
func (p *partState) lag() int64 {
	n := p.next()
	if n < 0 || p.hwm < 0 {
		return -1
	}
	return max(p.hwm-n, 0)
}

// PartitionState is one partition a Reader consumes, as Assignment
// returns it. An offset the Reader does not know yet is -1.
type PartitionState struct {
	Topic     string
	Partition int
	// Committed is the group's committed offset, as read when the
	// partition was assigned and as the Reader's commits moved it; -1
	// when the group has none, and in partition mode.
	Committed int64
	// Position is the offset of the next message the Reader hands out:
	// the last one handed out + 1 (or the last transaction marker read
	// past + 1), else Committed (where the Reader starts).
	Position int64
	// HighWatermark is the partition's high watermark as the latest
	// fetch that returned records of it (or ReadLag) saw it.
	HighWatermark int64
	// Lag is HighWatermark - Position, at least 0. Offsets that hold no
	// message (compacted away) count until the Reader hands out one past
	// them; a transaction's marker counts until the Reader reads past it
	// (the next read takes it, with no message to hand out).
	Lag int64
	// FetchedFrom is the broker the last records of the partition came
	// from (its node ID, address and rack: the leader, or with fetch from
	// follower the replica in the client's zone); node -1 before any.
	FetchedFrom     int32
	FetchedFromAddr string
	FetchedFromRack string
}

// Assignment returns the partitions the Reader consumes, sorted by topic
// and partition: in group mode those the group assigned it now (none
// between a revocation and the next assignment), with their committed
// offsets, positions, high watermarks and lags; in partition mode its one
// partition (Committed -1). kafka-go has no such method.
func (r *Reader) Assignment() []PartitionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.group {
		pos, hwm := r.offset, int64(-1)
		if pos < 0 {
			pos = -1
		} else if r.handed > 0 || r.lag > 0 {
			hwm = pos + r.lag
		}
		return []PartitionState{r.hooks.fetchedFrom(PartitionState{Topic: r.config.Topic, Partition: r.config.Partition, Committed: -1,
			Position: pos, HighWatermark: hwm, Lag: lagOf(pos, hwm)})}
	}
	out := make([]PartitionState, 0, len(r.owned))
	for tp, st := range r.owned {
		out = append(out, r.hooks.fetchedFrom(PartitionState{Topic: tp.topic, Partition: int(tp.partition), Committed: st.committed,
			Position: st.next(), HighWatermark: st.hwm, Lag: st.lag()}))
	}
	slices.SortFunc(out, func(a, b PartitionState) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// fetchedFrom is p with the broker its partition's last records came
// from.
func (h *engineHooks) fetchedFrom(p PartitionState) PartitionState {
	p.FetchedFrom = -1
	if v, ok := h.source.Load(topicPartition{p.Topic, int32(p.Partition)}); ok {
		b := v.(*brokerCounters)
		p.FetchedFrom, p.FetchedFromAddr, p.FetchedFromRack = b.node, b.addr, b.rack
	}
	return p
}

// lagOf is hwm - pos, at least 0; -1 when either is unknown.
func lagOf(pos, hwm int64) int64 {
	if pos < 0 || hwm < 0 {
		return -1
	}
	return max(hwm-pos, 0)
}

// groupLag is the sum of the lags of the owned partitions whose lag is
// known, and whether any is. r.mu is held.
func (r *Reader) groupLagLocked() (int64, bool) {
	var sum int64
	known := false
	for _, st := range r.owned {
		if l := st.lag(); l >= 0 {
			sum += l
			known = true
		}
	}
	return sum, known
}

// groupOffsetLocked is the position of the one partition the Reader
// owns, -1 when it owns none or several. r.mu is held.
func (r *Reader) groupOffsetLocked() int64 {
	if len(r.owned) != 1 {
		return -1
	}
	for _, st := range r.owned {
		return st.next()
	}
	return -1
}

// offsetsFetched records the committed offsets the engine read for the
// partitions just assigned (kgo's OnOffsetsFetched).
func (r *Reader) offsetsFetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	topics := resp.Topics
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			ft := kmsg.NewOffsetFetchResponseTopic()
			ft.Topic = t.Topic
			for _, p := range t.Partitions {
				fp := kmsg.NewOffsetFetchResponseTopicPartition()
				fp.Partition, fp.Offset, fp.ErrorCode = p.Partition, p.Offset, p.ErrorCode
				ft.Partitions = append(ft.Partitions, fp)
			}
			topics = append(topics, ft)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range topics {
		for _, p := range t.Partitions {
			if st := r.owned[topicPartition{t.Topic, p.Partition}]; st != nil && p.ErrorCode == 0 {
				st.read = true
				if p.Offset >= 0 {
					st.committed = p.Offset
				}
			}
		}
	}
	return nil
}

// adjustOffsets places the group's committed offsets as kafka-go's Reader
// does, before the engine fetches from them. A committed offset past the
// end of its partition's log (a topic recreated or truncated, a cluster
// failed over) is waited for: the engine starts at the end, and the
// Reader hands out nothing below the committed offset. With
// OffsetOutOfRangeError, one below the log's start (retention deleted it
// while the group was down) starts there, as in kafka-go; one past the
// end is kafka.OffsetOutOfRange until the log reaches it. Under
// ReadCommitted, a partition without a committed offset that starts at
// the end (StartOffset LastOffset) starts at the high watermark, as
// kafka-go's, not at the engine's last stable offset, which stops before
// an open transaction. When the offsets cannot be listed within
// adjustTimeout, the engine fetches from them as they are, and a fetch
// out of range places them (Reader.outOfRange).
func (r *Reader) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var tps, ends []topicPartition
	committed := r.config.IsolationLevel == kafka.ReadCommitted
	for t, ps := range offsets {
		for p, o := range ps {
			switch at := o.EpochOffset().Offset; {
			case at >= 0:
				tps = append(tps, topicPartition{t, p})
			case at == -1 && committed: // the end
				ends = append(ends, topicPartition{t, p})
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, adjustTimeout)
	defer cancel()
	if len(ends) > 0 {
		hwms, err := r.listOffsets(ctx, ends, -1)
		if err != nil {
			r.s.logger.Warn("azkafka: listing the high watermarks of the assigned partitions failed; the engine starts them at their last stable offset",
				"group", r.config.GroupID, "error", err)
		}
		for tp, hwm := range hwms {
			if hwm >= 0 {
				offsets[tp.topic][tp.partition] = kgo.NewOffset().At(hwm).WithEpoch(-1)
			}
		}
	}
	if len(tps) == 0 {
		return offsets, nil
	}
	oore := r.config.OffsetOutOfRangeError
	ts := int64(-1) // the end
	if oore {
		ts = -2 // the start
	}
	bounds, err := r.listOffsets(ctx, tps, ts)
	if err != nil {
		r.s.logger.Warn("azkafka: listing the log bounds of the assigned partitions failed; the engine fetches from their committed offsets (one out of range is placed at the first fetch, as kafka-go places it)",
			"group", r.config.GroupID, "error", err)
		return offsets, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tp := range tps {
		off := offsets[tp.topic][tp.partition].EpochOffset().Offset
		bound, ok := bounds[tp]
		switch {
		case !ok || bound < 0:
		case !oore && off > bound:
			offsets[tp.topic][tp.partition] = kgo.NewOffset().At(bound).WithEpoch(-1)
			if st := r.owned[tp]; st != nil {
				st.floor = off
			}
			r.s.logger.Info("azkafka: the committed offset is past the end of the partition's log; the Reader waits for the log to reach it, as kafka-go's does",
				"group", r.config.GroupID, "topic", tp.topic, "partition", tp.partition, "committed", off, "end", bound)
		case oore && off < bound:
			offsets[tp.topic][tp.partition] = kgo.NewOffset().At(bound).WithEpoch(-1)
		}
	}
	return offsets, nil
}

// adjustTimeout bounds adjustOffsets' listing of the log bounds.
const adjustTimeout = 10 * time.Second

// noteCommitted records the offsets a commit of offsets stored, resp and
// err being its answer.
func (r *Reader) noteCommitted(offsets map[string]map[int32]kgo.EpochOffset, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil || resp == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			o, ok := offsets[t.Topic][p.Partition]
			st := r.owned[topicPartition{t.Topic, p.Partition}]
			if ok && st != nil && kerr.ErrorForCode(p.ErrorCode) == nil {
				st.committed = o.Offset
			}
		}
	}
}

// readGroupLag is ReadLag in group mode: it asks the leaders of the owned
// partitions for their end offsets (and, for those the Reader has neither
// read nor a committed offset of, where StartOffset starts it), records
// them, and returns the sum of the lags.
func (r *Reader) readGroupLag(ctx context.Context) (int64, error) {
	r.mu.Lock()
	tps := make([]topicPartition, 0, len(r.owned))
	var unplaced []topicPartition
	for tp, st := range r.owned {
		tps = append(tps, tp)
		if st.next() < 0 {
			unplaced = append(unplaced, tp)
		}
	}
	r.mu.Unlock()
	if len(tps) == 0 {
		return 0, nil
	}
	var ends, starts map[topicPartition]int64
	err := r.retrying(ctx, metrics.OpListOffsets, func(ctx context.Context) (err error) {
		if ends, err = r.listOffsets(ctx, tps, -1); err != nil || len(unplaced) == 0 || r.config.StartOffset == kafka.LastOffset {
			starts = ends
			return err
		}
		starts, err = r.listOffsets(ctx, unplaced, -2)
		return err
	}, engineTransient)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum int64
	for tp, end := range ends {
		if st := r.owned[tp]; st != nil {
			st.hwm = max(st.hwm, end)
			if s, ok := starts[tp]; ok && st.start < 0 {
				st.start = s
			}
			sum += max(st.lag(), 0)
		}
	}
	return sum, nil
}

// listOffsets lists the offsets of tps at ts (-1: the end, the high
// watermark; -2: the log's start; see isolation).
func (r *Reader) listOffsets(ctx context.Context, tps []topicPartition, ts int64) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = r.isolation(ts)
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.partition, ts, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	ends := map[topicPartition]int64{}
	for _, shard := range r.engine().RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, kafkaError(shard.Err)
		}
		resp := shard.Resp.(*kmsg.ListOffsetsResponse)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, kafkaError(err)
				}
				ends[topicPartition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return ends, nil
}

// HealthState is a Reader's state, as Health reports it.
type HealthState string

const (
	// HealthStarting: no broker has answered the Reader yet, and none
	// has failed it.
	HealthStarting HealthState = "starting"
	// HealthOK: the brokers answer.
	HealthOK HealthState = "ok"
	// HealthRetrying: the engine is retrying errors it met less than the
	// unhealthy bound (the Reader's MaxWait) ago; reads go on once they
	// pass.
	HealthRetrying HealthState = "retrying"
	// HealthUnreachable: no broker has answered for longer than the
	// bound; the Reader keeps retrying (and said so at Warn).
	HealthUnreachable HealthState = "unreachable"
	// HealthRefused: the cluster refused the Reader in a way retrying
	// cannot fix (authentication, authorization, TLS); reads return the
	// error.
	HealthRefused HealthState = "refused"
	// HealthClosed: Close was called.
	HealthClosed HealthState = "closed"
)

// ReaderHealth is a Reader's health, for a readiness check.
type ReaderHealth struct {
	State HealthState
	// Since is when State began: the first error of a run of errors, the
	// answer that ended one, Close; the Reader's creation for
	// HealthStarting.
	Since time.Time
	// LastFetch is when a fetch response last came back without error;
	// zero before the first.
	LastFetch time.Time
	// Assigned is the number of partitions the Reader consumes (see
	// Assignment); Lag their summed lag as Lag returns it.
	Assigned int
	Lag      int64
	// Cause is the last error met, while State is HealthRetrying,
	// HealthUnreachable or HealthRefused.
	Cause error
}

// Healthy reports whether the Reader is reading or about to: State is
// HealthOK, HealthStarting or HealthRetrying. An HTTP readiness handler:
//
//	http.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
//		if h := r.Health(); !h.Healthy() {
//			http.Error(w, fmt.Sprintf("%s since %s: %v", h.State, h.Since.Format(time.RFC3339), h.Cause), http.StatusServiceUnavailable)
//		}
//	})
func (h ReaderHealth) Healthy() bool {
	return h.State == HealthOK || h.State == HealthStarting || h.State == HealthRetrying
}

// Health returns the Reader's health without I/O: HealthUnreachable once
// no broker has answered for longer than the Reader's MaxWait (10 s by
// default; the same bound after which it warns in the log), HealthOK again
// as soon as one answers. See ExampleReader_Health for a readiness
// endpoint. kafka-go has no such method (kafka-go #1182).
func (r *Reader) Health() ReaderHealth {
	h := r.hooks.health(r.config.MaxWait, r.created)
	if r.closed.Load() {
		h.State, h.Since, h.Cause = HealthClosed, time.Unix(0, r.closedAt.Load()), nil
	}
	h.Assigned = len(r.Assignment())
	h.Lag = r.Lag()
	return h
}
