package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func TestLogMessages(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("logs", 1))
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "logs", RequiredAcks: kafka.RequireAll}
	err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("a"), Value: []byte("1")}, kafka.Message{Key: []byte("b"), Value: []byte("2")})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(strings.Join(c.Addrs(), ","), "logs", "loggers")
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	if err := logMessages(ctx, r, &out, 2); err != nil {
		t.Fatal(err)
	}
	if want := "logs/0@0: a = 1\nlogs/0@1: b = 2\n"; out.String() != want {
		t.Fatalf("logged %q, want %q", out.String(), want)
	}
}
