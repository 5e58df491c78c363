package azotel_test

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	azotel "github.com/azkafka/azkafka/contrib/otel"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

func ExampleNewMetrics() {
	cluster, err := embedded.Start(embedded.Topic("events", 3))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	// Any MeterProvider: here the SDK's, read by hand.
	reader := sdkmetric.NewManualReader()
	m, err := azotel.NewMetrics(azotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(cluster.Addrs()...), Topic: "events", RequiredAcks: kafka.RequireAll},
		sdk.WithAZ("az-a"), sdk.WithMetrics(m))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("v1")}, kafka.Message{Value: []byte("v2")}); err != nil {
		fmt.Println(err)
	}
	w.Close()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name == "messaging.client.sent.messages" {
				fmt.Println(mt.Name, mt.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
			}
		}
	}
	// Output: messaging.client.sent.messages 2
}

func ExampleNewTracer() {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	t := azotel.NewTracer(azotel.WithTracerProvider(tp), azotel.WithConsumerGroup("billing"))

	// Producer side: t.Writer(w, "events").WriteMessages(ctx, msgs...)
	// carries the send span in each message; Inject does it by hand.
	ctx, span := tp.Tracer("app").Start(context.Background(), "request")
	m := kafka.Message{Topic: "events", Value: []byte("v")}
	t.Inject(ctx, &m)
	span.End()

	// Consumer side: the process span continues the producer's trace.
	_ = t.Process(context.Background(), m, func(ctx context.Context) error {
		fmt.Println("headers:", m.Headers[0].Key)
		return nil
	})
	// Output: headers: traceparent
}
