package main

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

func TestProduce(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("posts", 1))
	w := newWriter(strings.Join(c.Addrs(), ","), "posts")
	defer w.Close()
	srv := httptest.NewServer(produce(w))
	defer srv.Close()
	for _, body := range []string{"first", "second"} {
		resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "posts", MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, want := range []string{"first", "second"} {
		m, err := r.ReadMessage(ctx)
		if err != nil || string(m.Value) != want {
			t.Fatalf("ReadMessage = %q, %v; want %q", m.Value, err, want)
		}
	}
}
