// Package embedded starts an in-process Kafka-protocol cluster on loopback
// ports, for hermetic tests and for examples that must run with no arguments.
//
// It wraps franz-go's kfake: every broker speaks the real Kafka wire protocol,
// so segmentio/kafka-go clients talk to it as they would to Apache Kafka.
//
//	c, err := embedded.Start(embedded.Brokers(1), embedded.Topic("events", 3))
//	if err != nil { ... }
//	defer c.Close()
//	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "events"}
package embedded

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is a running in-process cluster. It is safe for concurrent use.
type Cluster struct {
	k     *kfake.Cluster
	addrs []string
}

type config struct {
	brokers int
	topics  []topic
	kopts   []kfake.Opt
}

type topic struct {
	name       string
	partitions int
}

// Option configures Start.
type Option func(*config)

// Brokers sets the number of brokers. Default: 1.
func Brokers(n int) Option { return func(c *config) { c.brokers = n } }

// Topic creates a topic with the given number of partitions at start.
func Topic(name string, partitions int) Option {
	return func(c *config) { c.topics = append(c.topics, topic{name, partitions}) }
}

// KfakeOptions passes options straight to kfake.NewCluster.
func KfakeOptions(opts ...kfake.Opt) Option {
	return func(c *config) { c.kopts = append(c.kopts, opts...) }
}

// Start starts a cluster listening on 127.0.0.1 with random ports.
// Groups accept session timeouts down to 100 ms, so consumer-group tests
// can rebalance quickly.
func Start(opts ...Option) (*Cluster, error) {
	cfg := config{brokers: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.brokers < 1 {
		return nil, fmt.Errorf("embedded: Brokers(%d): need at least 1", cfg.brokers)
	}
	kopts := []kfake.Opt{
		kfake.NumBrokers(cfg.brokers),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	for _, t := range cfg.topics {
		kopts = append(kopts, kfake.SeedTopics(int32(t.partitions), t.name))
	}
	kopts = append(kopts, cfg.kopts...)
	k, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: starting cluster: %w", err)
	}
	return &Cluster{k: k, addrs: k.ListenAddrs()}, nil
}

// StartT starts a cluster for a test and closes it when the test ends.
func StartT(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Addrs returns the brokers' host:port addresses.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Kfake returns the underlying kfake cluster, for tests that need its
// control hooks.
func (c *Cluster) Kfake() *kfake.Cluster { return c.k }

// CreateTopic creates a topic with the given number of partitions through
// the Kafka protocol (CreateTopics), as a client would.
func (c *Cluster) CreateTopic(ctx context.Context, name string, partitions int) error {
	return CreateTopic(ctx, c.addrs, name, partitions)
}

// DeleteTopic deletes a topic through the Kafka protocol (DeleteTopics),
// as an administrator would.
func (c *Cluster) DeleteTopic(ctx context.Context, name string) error {
	cl := &kafka.Client{Addr: kafka.TCP(c.addrs...), Timeout: 10 * time.Second}
	resp, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{name}})
	if err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	if err := resp.Errors[name]; err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	return nil
}

// Close stops every broker and closes all client connections.
func (c *Cluster) Close() { c.k.Close() }

// CreateTopic creates a topic on any Kafka-protocol cluster reachable at
// addrs, with replication factor 1. An existing topic is not an error.
func CreateTopic(ctx context.Context, addrs []string, name string, partitions int) error {
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}},
	})
	if err != nil {
		return fmt.Errorf("create topic %q: %w", name, err)
	}
	if err := resp.Errors[name]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %q: %w", name, err)
	}
	return nil
}

// WaitReady blocks until a broker at one of addrs answers a Metadata
// request, or ctx is done.
func WaitReady(ctx context.Context, addrs []string) error {
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 2 * time.Second}
	var last error
	for {
		_, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker %v not ready: %w (last error: %v)", addrs, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
