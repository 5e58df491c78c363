// Consumer reads messages as a consumer-group member with sdk.Reader, the
// drop-in replacement for kafka.Reader that stamps the WarpStream client ID
// and keeps transient connection errors (closes by interzone load
// balancing, a dead coordinator connection during a commit) from the
// caller.
//
// With no arguments it starts an embedded broker, produces a few messages
// to read, and uses the explicit availability zone "az-a" (no zone
// detection):
//
//	go run ./examples/consumer
//	go run ./examples/consumer -brokers broker1:9092 -topic events -group billing -az us-east-1a -n 100
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated bootstrap brokers; empty starts an embedded broker with sample messages")
	topic := flag.String("topic", "events", "topic to read")
	group := flag.String("group", "example-group", "consumer group ID")
	az := flag.String("az", "az-a", "availability zone to stamp into the client ID; empty detects it (cloud metadata)")
	n := flag.Int("n", 5, "number of messages to read before exiting")
	flag.Parse()
	if err := run(*brokers, *topic, *group, *az, *n); err != nil {
		log.Fatalf("consumer: %v", err)
	}
}

func run(brokers, topic, group, az string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	addrs := strings.Split(brokers, ",")
	var opts []sdk.Option
	if az != "" {
		opts = append(opts, sdk.WithAZ(az))
		fmt.Printf("using the explicit availability zone %q (-az); zone detection is skipped\n", az)
	}
	if brokers == "" {
		c, err := embedded.Start(embedded.Topic(topic, 3))
		if err != nil {
			return err
		}
		defer c.Close()
		addrs = c.Addrs()
		fmt.Printf("embedded broker listening on %v\n", addrs)
		if err := produceSamples(ctx, addrs, topic, n, opts); err != nil {
			return err
		}
	}

	// The change from kafka-go: kafka.NewReader(cfg) becomes
	// sdk.NewReader(cfg), which returns config errors instead of panicking.
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers:     addrs,
		GroupID:     group,
		Topic:       topic,
		StartOffset: kafka.FirstOffset,
		MaxWait:     100 * time.Millisecond,
	}, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	for i := 0; i < n; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		fmt.Printf("partition %d offset %d: %s = %s\n", m.Partition, m.Offset, m.Key, m.Value)
		if err := r.CommitMessages(ctx, m); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	st := r.Stats()
	fmt.Printf("client ID: %s\n", st.SDK.ClientID)
	fmt.Printf("AZ: %q (source: %s); transient errors absorbed: %d, connections created: %d\n",
		st.SDK.AZ, st.SDK.AZSource, st.SDK.TransientErrors, st.SDK.Conn.ConnectionsCreated)
	return nil
}

func produceSamples(ctx context.Context, addrs []string, topic string, n int, opts []sdk.Option) error {
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        topic,
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
	}, opts...)
	if err != nil {
		return err
	}
	defer w.Close()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("value-%d", i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("producing sample messages: %w", err)
	}
	fmt.Printf("produced %d sample messages to %q\n", n, topic)
	return nil
}
