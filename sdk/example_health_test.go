package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

// A readiness endpoint: 503 while the Reader cannot read (no broker has
// answered for longer than MaxWait, the cluster refused it, or it is
// closed), 200 otherwise. Health does no I/O, so a probe costs nothing.
func ExampleReader_Health() {
	ctx := context.Background()
	brokers, stop := exampleBroker("payments", 1)
	defer stop()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "payments", RequiredAcks: kafka.RequireAll, BatchTimeout: 10 * time.Millisecond}
	_ = w.WriteMessages(ctx, kafka.Message{Value: []byte("p-1")})
	w.Close()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "payments", MaxWait: 50 * time.Millisecond},
		sdk.WithAZ("az-a"))
	if err != nil {
		fmt.Println(err)
		return
	}

	ready := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if h := r.Health(); !h.Healthy() {
			http.Error(w, fmt.Sprintf("%s since %s: %v", h.State, h.Since.Format(time.RFC3339), h.Cause), http.StatusServiceUnavailable)
		}
	})
	// In a program: http.Handle("/ready", ready).

	probe := func() {
		rec := httptest.NewRecorder()
		ready.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ready", nil))
		fmt.Println(rec.Code, r.Health().State)
	}
	if _, err := r.ReadMessage(ctx); err != nil {
		fmt.Println(err)
		return
	}
	probe()
	r.Close()
	probe()
	// Output:
	// 200 ok
	// 503 closed
}
