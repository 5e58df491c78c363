package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

// exampleBroker starts an embedded broker with one topic for the examples.
func exampleBroker(topic string, partitions int) (addrs []string, stop func()) {
	c, err := embedded.Start(embedded.Topic(topic, partitions))
	if err != nil {
		panic(err)
	}
	return c.Addrs(), c.Close
}

func ExampleNewWriter() {
	brokers, stop := exampleBroker("events", 3)
	defer stop()

	// The change: &kafka.Writer{...} becomes sdk.NewWriter(&kafka.Writer{...}).
	// WithAZ skips zone detection; in production AZKAFKA_AZ or detection
	// provides it.
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        "events",
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
	}, sdk.WithAZ("az-a"), sdk.WithClientID("billing"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	err = w.WriteMessages(context.Background(),
		kafka.Message{Key: []byte("k1"), Value: []byte("v1")},
		kafka.Message{Key: []byte("k2"), Value: []byte("v2")},
	)
	var werrs kafka.WriteErrors
	switch {
	case errors.As(err, &werrs):
		fmt.Printf("%d of %d messages failed\n", werrs.Count(), len(werrs))
	case err != nil:
		fmt.Println(err)
	default:
		st := w.Stats()
		fmt.Printf("delivered %d messages; AZ %s from %s\n", st.Messages, st.SDK.AZ, st.SDK.AZSource)
	}
	// Output: delivered 2 messages; AZ az-a from option
}

func ExampleNewWriter_async() {
	brokers, stop := exampleBroker("clicks", 1)
	defer stop()

	delivered := make(chan int, 10)
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        "clicks",
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		Async:        true,
		// Called once per message batch, after the SDK's retries.
		Completion: func(msgs []kafka.Message, err error) {
			if err == nil {
				delivered <- len(msgs)
			}
		},
	}, sdk.WithAZ("az-a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = w.WriteMessages(context.Background(), kafka.Message{Value: []byte("c1")}, kafka.Message{Value: []byte("c2")})
	w.Close() // waits for delivery and the Completion calls
	close(delivered)
	total := 0
	for n := range delivered {
		total += n
	}
	fmt.Println("delivered", total)
	// Output: delivered 2
}

// WriterIdempotence tells, without contacting the cluster, whether a Writer
// would produce idempotently, and why.
func ExampleWriterIdempotence() {
	noEnv := sdk.WithGetenv(func(string) string { return "" })
	for _, acks := range []kafka.RequiredAcks{kafka.RequireAll, kafka.RequireOne} {
		on, why, _ := sdk.WriterIdempotence(acks, noEnv)
		fmt.Println(on, why)
	}
	_, _, err := sdk.WriterIdempotence(kafka.RequireOne, noEnv, sdk.WithIdempotence(true))
	fmt.Println(err)
	// Output:
	// true auto: RequiredAcks is RequireAll
	// false auto: RequiredAcks is RequireOne, not RequireAll
	// WithIdempotence(true) needs kafka.Writer.RequiredAcks = kafka.RequireAll (it is RequireOne): set RequiredAcks to kafka.RequireAll, or turn idempotence off
}
