// Command getstarted is a kafka-go producer and consumer converted to
// azkafka: sdk.NewWriter wraps the kafka.Writer, sdk.NewReader replaces
// kafka.NewReader, and the rest is kafka-go's API.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

func main() {
	brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	if brokers[0] == "" {
		brokers = []string{"localhost:9092"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, brokers); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, brokers []string) error {
	// Was: w := &kafka.Writer{...}
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:  kafka.TCP(brokers...),
		Topic: "events",
		// Murmur2Balancer places a key where Java producers, Kafka Streams and iq put it.
		Balancer:               kafka.Murmur2Balancer{},
		RequiredAcks:           kafka.RequireAll, // idempotent: each message stored once, in order
		AllowAutoTopicCreation: true,
	})
	if err != nil {
		return err
	}
	err = w.WriteMessages(ctx,
		kafka.Message{Key: []byte("alice"), Value: []byte("signed up")},
		kafka.Message{Key: []byte("bob"), Value: []byte("signed up")},
		kafka.Message{Key: []byte("alice"), Value: []byte("paid")},
	)
	if err := errors.Join(err, w.Close()); err != nil {
		return err
	}

	// Was: r := kafka.NewReader(kafka.ReaderConfig{...})
	r, err := sdk.NewReader(kafka.ReaderConfig{
		Brokers: brokers,
		GroupID: "getstarted",
		Topic:   "events",
	})
	if err != nil {
		return err
	}
	defer r.Close()
	for range 3 {
		m, err := r.ReadMessage(ctx) // fetches, then commits
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s (partition %d, offset %d)\n", m.Key, m.Value, m.Partition, m.Offset)
	}
	st := r.Stats().SDK
	fmt.Printf("client ID %s, AZ %q (%s)\n", st.ClientID, st.AZ, st.AZSource)
	return nil
}
