package difftest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// SDKFactory builds the SDK's clients with opts.
func SDKFactory(opts ...sdk.Option) Factory {
	return Factory{
		Impl: SDK,
		NewWriter: func(w *kafka.Writer) (Writer, error) {
			sw, err := sdk.NewWriter(w, opts...)
			if err != nil {
				return nil, err
			}
			return sdkWriter{sw}, nil
		},
		NewReader: func(cfg kafka.ReaderConfig) (Reader, error) {
			r, err := sdk.NewReader(cfg, opts...)
			if err != nil {
				return nil, err
			}
			return sdkReader{r}, nil
		},
	}
}

type sdkWriter struct{ *sdk.Writer }

func (w sdkWriter) Stats() kafka.WriterStats { return w.Writer.Stats().WriterStats }

type sdkReader struct{ *sdk.Reader }

func (r sdkReader) Stats() kafka.ReaderStats { return r.Reader.Stats().ReaderStats }

// Embedded returns a cluster maker for Run: one in-process broker
// (franz-go's kfake) per side, with opts.
func Embedded(opts ...embedded.Option) func(t testing.TB, impl Impl) Cluster {
	return func(t testing.TB, impl Impl) Cluster {
		c, err := embedded.Start(opts...)
		if err != nil {
			t.Fatalf("%s: %v", impl, err)
		}
		return embeddedCluster{c}
	}
}

type embeddedCluster struct{ c *embedded.Cluster }

func (e embeddedCluster) Addrs() []string            { return e.c.Addrs() }
func (e embeddedCluster) Name(logical string) string { return logical }
func (e embeddedCluster) Close()                     { e.c.Close() }
func (e embeddedCluster) Kfake() *embedded.Cluster   { return e.c }
func (e embeddedCluster) DeleteTopic(ctx context.Context, topic string) error {
	return deleteTopic(ctx, e.c.Addrs(), topic)
}

func (e embeddedCluster) CreateTopic(ctx context.Context, topic string, partitions int) error {
	return createTopic(ctx, e.c.Addrs(), topic, partitions)
}

func (e embeddedCluster) AddPartitions(ctx context.Context, topic string, total int) error {
	return addPartitions(ctx, e.c.Addrs(), topic, total)
}

// runs numbers the Shared clusters of a process, so that names never
// repeat on a broker that outlives one test.
var runs atomic.Int64

// Shared returns a cluster maker for Run on a real broker at addrs: both
// sides on it, every topic and group name suffixed with the side and a
// number of its own.
func Shared(addrs []string) func(t testing.TB, impl Impl) Cluster {
	return func(t testing.TB, impl Impl) Cluster {
		return sharedCluster{addrs: addrs, suffix: fmt.Sprintf("-%s-%d-%d", impl, time.Now().UnixNano()%1e6, runs.Add(1))}
	}
}

type sharedCluster struct {
	addrs  []string
	suffix string
}

func (c sharedCluster) Addrs() []string            { return c.addrs }
func (c sharedCluster) Name(logical string) string { return logical + c.suffix }
func (c sharedCluster) Close()                     {}
func (c sharedCluster) DeleteTopic(ctx context.Context, topic string) error {
	return deleteTopic(ctx, c.addrs, topic)
}

func (c sharedCluster) AddPartitions(ctx context.Context, topic string, total int) error {
	return addPartitions(ctx, c.addrs, topic, total)
}

func (c sharedCluster) CreateTopic(ctx context.Context, topic string, partitions int) error {
	return createTopic(ctx, c.addrs, topic, partitions)
}

// admin returns a franz-go client for the harness's own requests: never
// through the proxy, never the implementation under test.
func admin(addrs []string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ClientID("difftest")}, opts...)...)
}

// createTopic creates topic, with the topic configs given in pairs of
// name and value, and waits until every partition's leader answers
// ListOffsets.
func createTopic(ctx context.Context, addrs []string, topic string, partitions int, configs ...string) error {
	cl, err := admin(addrs)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 1
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating %s: %w", topic, err)
		}
	}
	return waitLed(ctx, cl, topic, partitions)
}

// addPartitions grows topic to total partitions and waits until each
// has a leader.
func addPartitions(ctx context.Context, addrs []string, topic string, total int) error {
	cl, err := admin(addrs)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, int32(total)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("growing %s to %d partitions: %w", topic, total, err)
		}
	}
	return waitLed(ctx, cl, topic, total)
}

// waitLed waits until each of the partitions of topic has a leader that
// answers ListOffsets.
func waitLed(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	for {
		ends, err := endOffsets(ctx, cl, topic)
		if err == nil && len(ends) == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: partitions not led: %v (%w)", topic, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func deleteTopic(ctx context.Context, addrs []string, topic string) error {
	cl, err := admin(addrs)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("deleting %s: %w", topic, err)
		}
	}
	// Until the broker's metadata no longer has it: requests naming it
	// are refused from then on, on both sides alike.
	for {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(ctx, cl)
		if err == nil && len(mresp.Topics) == 1 && errors.Is(kerr.ErrorForCode(mresp.Topics[0].ErrorCode), kerr.UnknownTopicOrPartition) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still in the metadata after its deletion: %w", topic, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// endOffsets returns the end offset of every partition of topic, by
// partition; an error when the topic is unknown or a partition has no
// leader.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) ([]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	n := len(mresp.Topics[0].Partitions)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	shards := cl.RequestSharded(ctx, req)
	ends := make([]int64, n)
	seen := 0
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, sh.Err
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", topic, p.Partition, err)
				}
				ends[p.Partition] = p.Offset
				seen++
			}
		}
	}
	if seen != n {
		return nil, fmt.Errorf("end offsets of %d of %d partitions", seen, n)
	}
	return ends, nil
}

// storedRecord is a record as the cluster holds it.
type storedRecord struct {
	Key, Value []byte
	Headers    []kafka.Header
	Time       time.Time
}

// readAll reads every partition of topic from its start to its end
// offset, straight from the broker.
func readAll(ctx context.Context, addrs []string, topic string) ([][]storedRecord, error) {
	cl, err := admin(addrs)
	if err != nil {
		return nil, err
	}
	ends, err := endOffsets(ctx, cl, topic)
	cl.Close()
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, nil
		}
		return nil, err
	}
	out := make([][]storedRecord, len(ends))
	parts := map[int32]kgo.Offset{}
	left := 0
	for p, end := range ends {
		if end > 0 {
			parts[int32(p)] = kgo.NewOffset().AtStart()
			left++
		}
	}
	if left == 0 {
		return out, nil
	}
	cl, err = admin(addrs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s[%d]: %w", t, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			sr := storedRecord{Key: r.Key, Value: r.Value, Time: r.Timestamp}
			for _, h := range r.Headers {
				sr.Headers = append(sr.Headers, kafka.Header{Key: h.Key, Value: h.Value})
			}
			out[r.Partition] = append(out[r.Partition], sr)
			if r.Offset == ends[r.Partition]-1 {
				left--
			}
		})
	}
	return out, nil
}

// committed returns group's committed offset of each partition of topic
// (-1 where none).
func committed(ctx context.Context, addrs []string, group, topic string, partitions int) ([]int64, error) {
	cl, err := admin(addrs)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := make([]int64, partitions)
	for i := range out {
		out[i] = -1
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if int(p.Partition) < partitions && p.ErrorCode == 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// Embedded reports that the cluster is the in-process broker.
func (e embeddedCluster) Embedded() bool { return true }

// Embedded reports that the cluster is a real broker.
func (c sharedCluster) Embedded() bool { return false }

// commitOffset stores offset as group's committed offset of topic's
// partition p, as a tool outside the group does (generation -1).
func commitOffset(ctx context.Context, addrs []string, group, topic string, p int32, offset int64) error {
	// By name: OffsetCommit v10 names topics by ID, which the request
	// does not set.
	cl, err := admin(addrs, kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = p, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("committing %d for %s on %s[%d]: %w", offset, group, topic, p, err)
			}
		}
	}
	return nil
}

// deleteRecords deletes the records of topic's partition p below offset
// (the log's start moves there, as retention moves it).
func deleteRecords(ctx context.Context, addrs []string, topic string, p int32, offset int64) error {
	cl, err := admin(addrs)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return shard.Err
		}
		for _, t := range shard.Resp.(*kmsg.DeleteRecordsResponse).Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("deleting records of %s[%d] below %d: %w", topic, p, offset, err)
				}
			}
		}
	}
	return nil
}

// topicExists reports whether the cluster has topic, asking without
// allowing its creation.
func topicExists(ctx context.Context, addrs []string, topic string) (bool, error) {
	cl, err := admin(addrs)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	return len(resp.Topics) == 1 && !errors.Is(kerr.ErrorForCode(resp.Topics[0].ErrorCode), kerr.UnknownTopicOrPartition), nil
}
