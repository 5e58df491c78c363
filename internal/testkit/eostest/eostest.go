// Package eostest is the rig of the exactly-once tests (the hermetic ones
// in sdk, the conformance suite's on Kafka 4.3.1, and the exactlyonce
// example): the input it writes, the job a Processor runs over it, and the
// check of what read_committed and read_uncommitted readers see; and the
// same job on franz-go alone, the control.
package eostest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/azkafka/azkafka/sdk"
)

// endMark begins the values ReadToEnd writes to find the end of a
// partition: each call writes, and stops at, one of its own (a call
// stopping at an earlier call's would miss what came after it).
const endMark = "eostest-end-"

// WriteInput writes n messages to topic: value "<i>", key "<i % keys>",
// i from from, with an idempotent producer, and returns an error when
// any of them was not written. A client that could not load the topic's
// metadata or its producer ID (the broker it asked was down: a node
// killed meanwhile) fails every record before sending any: WriteInput
// then writes them all again with a new client, until ctx ends.
func WriteInput(ctx context.Context, seeds []string, topic string, from, n, keys int) error {
	for {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
		if err != nil {
			return err
		}
		var mu sync.Mutex
		failed, first := 0, error(nil)
		promise := func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}
		for i := from; i < from+n; i++ {
			cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % keys)), Value: []byte(strconv.Itoa(i))}, promise)
		}
		err = cl.Flush(ctx)
		cl.Close()
		switch {
		case err != nil:
			return err
		case failed == 0:
			return nil
		case failed < n:
			return fmt.Errorf("writing input %d..%d to %s: %d of %d records failed: %w", from, from+n-1, topic, failed, n, first)
		case ctx.Err() != nil:
			return fmt.Errorf("writing input %d..%d to %s: every record failed (%w) until %w", from, from+n-1, topic, first, ctx.Err())
		}
		// Every record failed: the engine retries a sent batch without
		// end, so these were never sent (the topic's metadata or the
		// producer ID could not be loaded). Write them all again.
		time.Sleep(100 * time.Millisecond)
	}
}

// Job is the transform a Processor runs: for each input "<i>" keyed k,
// one output "out-<i>" keyed k.
func Job(ctx context.Context, in []kafka.Message, out sdk.MessageWriter) error {
	msgs := make([]kafka.Message, len(in))
	for i, m := range in {
		msgs[i] = kafka.Message{Key: m.Key, Value: append([]byte("out-"), m.Value...)}
	}
	return out.WriteMessages(ctx, msgs...)
}

// KgoJob is Job on franz-go's GroupTransactSession alone, the control the
// Processor is compared with: from In to Out in group Group with
// transactional ID ID, read_committed, one transaction per poll of at most
// 10,000 records, output keys partitioned as kafka.Hash does.
type KgoJob struct {
	Brokers            []string
	Group, In, Out, ID string
	// Opts are more options of the session (timeouts, the group
	// protocol); they come after the job's.
	Opts []kgo.Opt
	// ProduceFailed, if not nil, gets the error of a failed write; the
	// transaction is ended all the same.
	ProduceFailed func(error)
	// Ended, if not nil, gets the input records of each transaction ended
	// and whether it committed.
	Ended func(records int, committed bool)
}

// Run runs the job until ctx ends (nil) or a transaction fails to begin or
// end (its error).
func (j *KgoJob) Run(ctx context.Context) error {
	opts := append([]kgo.Opt{kgo.SeedBrokers(j.Brokers...), kgo.TransactionalID(j.ID),
		kgo.ConsumerGroup(j.Group), kgo.ConsumeTopics(j.In), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(j.Out),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a)))}, j.Opts...)
	s, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		fs := s.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			return nil
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return err
		}
		recs := make([]*kgo.Record, 0, fs.NumRecords())
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)})
		})
		if err := s.ProduceSync(ctx, recs...).FirstErr(); err != nil && j.ProduceFailed != nil {
			j.ProduceFailed(err)
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return err
		}
		if j.Ended != nil {
			j.Ended(len(recs), committed)
		}
	}
}

// fnv32a is kafka-go's Hash balancer's hash (FNV-1a), so that a key's
// output partition is the same under both engines.
func fnv32a(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// ReadToEnd reads every partition of topic (parts of them) with the
// isolation level read_committed or not, up to an end mark of its own it
// writes first to each partition (after the transactions it must see
// ended), and returns the values by partition, end marks left out.
func ReadToEnd(ctx context.Context, seeds []string, topic string, parts int, committed bool) (map[int32][]string, error) {
	w, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	if err != nil {
		return nil, err
	}
	defer w.Close()
	mark := endMark + strconv.FormatInt(time.Now().UnixNano(), 36)
	for p := range int32(parts) {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(mark)}).FirstErr(); err != nil {
			return nil, fmt.Errorf("writing the end mark of %s[%d]: %w", topic, p, err)
		}
	}
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[int32][]string{}
	ended := map[int32]bool{}
	for len(ended) < parts {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w (%d of %d partitions to their end)", topic, ctx.Err(), len(ended), parts)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case ended[r.Partition]:
			case string(r.Value) == mark:
				ended[r.Partition] = true
			case strings.HasPrefix(string(r.Value), endMark): // an earlier call's
			default:
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		})
	}
	return got, nil
}

// Count is the number of values in byPart.
func Count(byPart map[int32][]string) int {
	n := 0
	for _, vs := range byPart {
		n += len(vs)
	}
	return n
}

// Check checks that byPart holds "out-<i>" exactly once for each i in
// [0, n), and, in each partition, the values of one key (i % keys) in
// increasing order of i. It names the first problems found.
func Check(byPart map[int32][]string, n, keys int) error {
	seen := make([]int, n)
	var errs []error
	for p, vs := range byPart {
		last := map[int]int{}
		for _, v := range vs {
			i, err := strconv.Atoi(strings.TrimPrefix(v, "out-"))
			if err != nil || i < 0 || i >= n || !strings.HasPrefix(v, "out-") {
				errs = append(errs, fmt.Errorf("partition %d: unexpected value %q", p, v))
				continue
			}
			seen[i]++
			if prev, ok := last[i%keys]; ok && i < prev {
				errs = append(errs, fmt.Errorf("partition %d: out-%d after out-%d of the same key", p, i, prev))
			}
			last[i%keys] = i
		}
	}
	var lost, dup []int
	for i, c := range seen {
		switch {
		case c == 0:
			lost = append(lost, i)
		case c > 1:
			dup = append(dup, i)
		}
	}
	if len(lost) > 0 {
		errs = append(errs, fmt.Errorf("%d lost, first %v", len(lost), lost[:min(len(lost), 10)]))
	}
	if len(dup) > 0 {
		errs = append(errs, fmt.Errorf("%d duplicated, first %v", len(dup), dup[:min(len(dup), 10)]))
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs[:min(len(errs), 12)]...)
}
