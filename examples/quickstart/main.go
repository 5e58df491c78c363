// Quickstart starts an embedded Kafka-protocol broker, produces one message
// with kafka-go and consumes it back, printing each step.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/azkafka/azkafka/internal/embedded"
	"github.com/segmentio/kafka-go"
)

func main() {
	if err := run(); err != nil {
		log.Fatalf("quickstart: %v", err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const topic = "quickstart"
	c, err := embedded.Start(embedded.Topic(topic, 1))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(os.Stdout, "embedded broker listening on %v\n", c.Addrs())

	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: topic, BatchTimeout: time.Millisecond}
	defer w.Close()
	msg := kafka.Message{Key: []byte("hello"), Value: []byte("world")}
	if err := w.WriteMessages(ctx, msg); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fmt.Printf("produced key=%q value=%q to topic %q\n", msg.Key, msg.Value, topic)

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: topic, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	got, err := r.ReadMessage(ctx)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	fmt.Printf("consumed key=%q value=%q from partition %d offset %d\n", got.Key, got.Value, got.Partition, got.Offset)
	return nil
}
