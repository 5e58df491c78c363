package sdk_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/metrics"
	"github.com/azkafka/azkafka/sdk"
)

// producedCounter is a metrics.Recorder that counts the records the
// brokers acknowledged; metrics.Nop stands in for the other events.
type producedCounter struct {
	metrics.Nop
	records atomic.Int64
}

func (c *producedCounter) Produced(_ metrics.Broker, _ string, _ int32, records, _, _ int) {
	c.records.Add(int64(records))
}

func ExampleWithMetrics() {
	brokers, stop := exampleBroker("events", 3)
	defer stop()

	// An exporter (contrib/prometheus, contrib/otel) is a metrics.Provider;
	// so is any function returning a Recorder per client.
	counter := &producedCounter{}
	provider := metrics.ProviderFunc(func(c metrics.Client) metrics.Recorder {
		fmt.Printf("a %s for topic %s in %s\n", c.Kind, c.Topic, c.AZ)
		return counter
	})
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events", RequiredAcks: kafka.RequireAll},
		sdk.WithAZ("az-a"), sdk.WithMetrics(provider))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("v1")}, kafka.Message{Value: []byte("v2")}); err != nil {
		fmt.Println(err)
	}
	w.Close() // the last batches' events have come once it returns
	fmt.Println("records acknowledged:", counter.records.Load())
	// Output:
	// a writer for topic events in az-a
	// records acknowledged: 2
}
