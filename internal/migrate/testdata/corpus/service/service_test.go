package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func TestHandlerAndConsumer(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("orders", 3))
	Brokers = c.Addrs()
	Setup()
	defer Close()
	srv := httptest.NewServer(http.HandlerFunc(Handler))
	defer srv.Close()
	for _, v := range []string{"a", "b", "c"} {
		resp, err := http.Post(srv.URL+"?key="+v, "text/plain", strings.NewReader("order "+v))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	err := Consume(ctx, "billing", 3, func(m kafka.Message) error { seen[string(m.Value)] = true; return nil })
	if err != nil || len(seen) != 3 || written != 3 {
		t.Fatalf("err %v, seen %v, written %d", err, seen, written)
	}
}
