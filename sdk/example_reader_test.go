package sdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

func ExampleNewReader() {
	ctx := context.Background()
	c, stop := exampleBroker("orders", 1)
	defer stop()

	w, _ := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c...), Topic: "orders", RequiredAcks: kafka.RequireAll}, sdk.WithAZ("az-a"))
	_ = w.WriteMessages(ctx, kafka.Message{Value: []byte("order-1")})
	w.Close()

	// The change: kafka.NewReader(cfg) becomes sdk.NewReader(cfg).
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c, Topic: "orders", MaxWait: 50 * time.Millisecond},
		sdk.WithAZ("az-a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s at offset %d; AZ %s (%s)\n", m.Value, m.Offset, r.Stats().SDK.AZ, r.Stats().SDK.AZSource)
	// Output: order-1 at offset 0; AZ az-a (option)
}
