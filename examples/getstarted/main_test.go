package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestGetStarted runs the README's program against the embedded broker
// that embedded.go starts when KAFKA_BROKERS is unset.
func TestGetStarted(t *testing.T) {
	brokers := os.Getenv("KAFKA_BROKERS")
	if brokers == "" {
		t.Fatal("embedded.go set no KAFKA_BROKERS")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, strings.Split(brokers, ",")); err != nil {
		t.Fatal(err)
	}
}
