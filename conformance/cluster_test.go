//go:build conformance

package conformance

// A KRaft cluster of Apache Kafka 4.3.1 on loopback for one test:
// kafkanode's three combined broker+controller nodes with a static quorum
// of three voters, so that killing or stopping any one node leaves a
// majority and the cluster carries on; broker.rack az-a, az-b, az-c;
// internal topics replicated three times (min.insync.replicas 2); the
// rack-aware replica selector. Each node is a dedicatedBroker: a test can
// kill -9, stop (SIGTERM: controlled shutdown) and restart any of them.
// `make cluster` (brokerctl cluster) starts the same cluster, plaintext.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/conformance/internal/kafkanode"
)

// clusterRacks are the racks of the cluster's nodes, node 1 first.
var clusterRacks = kafkanode.Racks

// kafkaCluster is a multi-node cluster of the test's own.
type kafkaCluster struct {
	t     testing.TB
	nodes []*dedicatedBroker // nodes[i] is node.id i+1
	racks []string
}

// clusterConfig is what a test adds to every node.
type clusterConfig struct {
	// ports names further free ports of every node (a listener's): @NAME@
	// in extra is the node's own.
	ports []string
	// extra returns lines appended to node id's config.
	extra func(id int) []string
	// formatArgs are added to every node's StorageTool format.
	formatArgs []string
}

// startCluster formats and starts one node per rack of clusterRacks and
// returns once every node answers and the cluster lists them all. The
// nodes are killed when the test ends; if it failed, the end of their
// logs is printed first.
func startCluster(t testing.TB, cc clusterConfig) *kafkaCluster {
	t.Helper()
	nodes, err := kafkanode.StartCluster(context.Background(), brokerSetup(t), t.TempDir(), kafkanode.ClusterConfig{
		Ports: cc.ports, Extra: cc.extra, FormatArgs: cc.formatArgs, Logf: t.Logf})
	c := &kafkaCluster{t: t, racks: clusterRacks}
	for _, n := range nodes {
		b := &dedicatedBroker{Node: n, t: t}
		b.cleanup()
		c.nodes = append(c.nodes, b)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Node is the node with node.id id (1-based).
func (c *kafkaCluster) Node(id int) *dedicatedBroker { return c.nodes[id-1] }

// Addrs are the PLAINTEXT addresses of every node, running or not.
func (c *kafkaCluster) Addrs() []string {
	var a []string
	for _, b := range c.nodes {
		a = append(a, b.Addrs()...)
	}
	return a
}

// LiveAddrs are the PLAINTEXT addresses of the running nodes.
func (c *kafkaCluster) LiveAddrs() []string {
	var a []string
	for _, b := range c.nodes {
		if b.Running() {
			a = append(a, b.Addrs()...)
		}
	}
	return a
}

// NamedAddrs are the addresses of every node's named port (a listener).
func (c *kafkaCluster) NamedAddrs(name string) []string {
	var a []string
	for _, b := range c.nodes {
		a = append(a, "127.0.0.1:"+strconv.Itoa(b.Port(name)))
	}
	return a
}

// metadata asks a running node, on a Transport of its own (kafka-go's
// caches metadata, and its pool may hold connections to a killed node).
func (c *kafkaCluster) metadata(ctx context.Context, topics ...string) (*kafka.MetadataResponse, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(c.LiveAddrs()...), Timeout: 5 * time.Second, Transport: tr}
	return cl.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
}

// waitFor polls metadata until ok returns nil; it fails the test with what
// and ok's last answer when ctx ends first.
func (c *kafkaCluster) waitFor(ctx context.Context, what string, ok func(*kafka.MetadataResponse) error, topics ...string) {
	c.t.Helper()
	var last error
	for {
		md, err := c.metadata(ctx, topics...)
		if err == nil {
			err = ok(md)
		}
		if err == nil {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			c.t.Fatalf("cluster: waiting for %s: %v (last: %v)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// partitionsOf returns the topic's partitions in metadata, or an error.
func partitionsOf(md *kafka.MetadataResponse, topic string) ([]kafka.Partition, error) {
	for _, tp := range md.Topics {
		if tp.Name == topic {
			if tp.Error != nil {
				return nil, tp.Error
			}
			return tp.Partitions, nil
		}
	}
	return nil, fmt.Errorf("topic %q not in metadata", topic)
}

// Leaders maps each partition of topic to its leader's node ID.
func (c *kafkaCluster) Leaders(ctx context.Context, topic string) map[int]int {
	c.t.Helper()
	var leaders map[int]int
	c.waitFor(ctx, "the leaders of "+topic, func(md *kafka.MetadataResponse) error {
		parts, err := partitionsOf(md, topic)
		if err != nil {
			return err
		}
		leaders = map[int]int{}
		for _, p := range parts {
			if p.Leader.Host == "" {
				return fmt.Errorf("partition %d has no leader", p.ID)
			}
			leaders[p.ID] = p.Leader.ID
		}
		return nil
	}, topic)
	return leaders
}

// WaitLeadersOff waits until no partition of the topics is led by node id
// or lacks a leader.
func (c *kafkaCluster) WaitLeadersOff(ctx context.Context, id int, topics ...string) {
	c.t.Helper()
	c.waitFor(ctx, fmt.Sprintf("no leader on node %d", id), func(md *kafka.MetadataResponse) error {
		for _, topic := range topics {
			parts, err := partitionsOf(md, topic)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if p.Leader.Host == "" || p.Leader.ID == id {
					return fmt.Errorf("%s partition %d: leader %d", topic, p.ID, p.Leader.ID)
				}
			}
		}
		return nil
	}, topics...)
}

// WaitFullISR waits until every partition of the topics has all nodes in
// sync, as after a restarted node caught up.
func (c *kafkaCluster) WaitFullISR(ctx context.Context, topics ...string) {
	c.t.Helper()
	c.waitFor(ctx, "every replica in sync", func(md *kafka.MetadataResponse) error {
		for _, topic := range topics {
			parts, err := partitionsOf(md, topic)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if len(p.Isr) != len(c.nodes) {
					return fmt.Errorf("%s partition %d: ISR %v", topic, p.ID, brokerIDs(p.Isr))
				}
			}
		}
		return nil
	}, topics...)
}

func brokerIDs(bs []kafka.Broker) []int {
	ids := make([]int, 0, len(bs))
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	sort.Ints(ids)
	return ids
}

// CreateTopic creates a topic replicated on every node with
// min.insync.replicas 2, and waits until every partition's leader answers.
func (c *kafkaCluster) CreateTopic(ctx context.Context, name string, partitions int) {
	c.t.Helper()
	c.createTopic(ctx, kafka.TopicConfig{Topic: name, NumPartitions: partitions, ReplicationFactor: len(c.nodes)}, partitions, nil)
}

// CreateTopicAssigned creates a topic with min.insync.replicas 2 whose
// partition p is replicated on the nodes replicas[p] (node IDs, the
// preferred leader first), and waits until every partition is led by its
// first replica, has all its replicas in sync and its leader answers.
func (c *kafkaCluster) CreateTopicAssigned(ctx context.Context, name string, replicas [][]int) {
	c.t.Helper()
	tc := kafka.TopicConfig{Topic: name, NumPartitions: -1, ReplicationFactor: -1}
	for p, r := range replicas {
		tc.ReplicaAssignments = append(tc.ReplicaAssignments, kafka.ReplicaAssignment{Partition: p, Replicas: r})
	}
	c.createTopic(ctx, tc, len(replicas), replicas)
}

// createTopic creates tc and waits until its partitions are led, in sync
// (every replica: len(replicas[p]), else every node) and, with replicas,
// led by replicas[p][0].
func (c *kafkaCluster) createTopic(ctx context.Context, tc kafka.TopicConfig, partitions int, replicas [][]int) {
	c.t.Helper()
	name := tc.Topic
	tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: "2"})
	cl := &kafka.Client{Addr: kafka.TCP(c.LiveAddrs()...), Timeout: 10 * time.Second}
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = resp.Errors[name]
	}
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		c.t.Fatalf("create topic %q: %v", name, err)
	}
	c.waitFor(ctx, "topic "+name+" led and in sync", func(md *kafka.MetadataResponse) error {
		parts, err := partitionsOf(md, name)
		if err != nil {
			return err
		}
		if len(parts) != partitions {
			return fmt.Errorf("%d of %d partitions", len(parts), partitions)
		}
		for _, p := range parts {
			inSync := len(c.nodes)
			if replicas != nil {
				inSync = len(replicas[p.ID])
				if p.Leader.ID != replicas[p.ID][0] {
					return fmt.Errorf("partition %d: leader %d, want %d", p.ID, p.Leader.ID, replicas[p.ID][0])
				}
			}
			if p.Leader.Host == "" || len(p.Isr) != inSync {
				return fmt.Errorf("partition %d: leader %q, ISR %v", p.ID, p.Leader.Host, brokerIDs(p.Isr))
			}
		}
		return topicLed(ctx, cl, name, partitions)
	}, name)
}
