// Producer writes messages with sdk.Writer, the drop-in replacement for
// kafka.Writer that stamps the WarpStream client ID and resends messages
// whose connection was closed by interzone load balancing.
//
// With no arguments it starts an embedded broker and uses the explicit
// availability zone "az-a" (no zone detection):
//
//	go run ./examples/producer
//	go run ./examples/producer -brokers broker1:9092 -topic events -az us-east-1a
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
	brokers := flag.String("brokers", "", "comma-separated bootstrap brokers; empty starts an embedded broker")
	topic := flag.String("topic", "events", "topic to write to")
	az := flag.String("az", "az-a", "availability zone to stamp into the client ID; empty detects it (cloud metadata)")
	n := flag.Int("n", 10, "number of messages")
	flag.Parse()
	if err := run(*brokers, *topic, *az, *n); err != nil {
		log.Fatalf("producer: %v", err)
	}
}

func run(brokers, topic, az string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	addrs := strings.Split(brokers, ",")
	if brokers == "" {
		c, err := embedded.Start(embedded.Topic(topic, 3))
		if err != nil {
			return err
		}
		defer c.Close()
		addrs = c.Addrs()
		fmt.Printf("embedded broker listening on %v\n", addrs)
	}
	var opts []sdk.Option
	if az != "" {
		opts = append(opts, sdk.WithAZ(az))
		fmt.Printf("using the explicit availability zone %q (-az); zone detection is skipped\n", az)
	}

	// The change from kafka-go: wrap the kafka.Writer literal (azkafka
	// migrate makes it with sdk.MustNewWriter where there is no error path).
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
	}, opts...)
	if err != nil {
		return err
	}
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("value-%d", i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		return fmt.Errorf("write: %w", err)
	}
	st := w.Stats()
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Printf("wrote %d messages to %q\n", st.Messages, topic)
	fmt.Printf("client ID: %s\n", st.SDK.ClientID)
	fmt.Printf("AZ: %q (source: %s); retries: %d, connections created: %d\n",
		st.SDK.AZ, st.SDK.AZSource, st.SDK.Retries, st.SDK.Conn.ConnectionsCreated)
	return nil
}
