package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/iq"
)

// TestGetStarted runs the README's program against the embedded broker
// that embedded.go starts when KAFKA_BROKERS is unset, and checks that
// each key landed where Java producers, Kafka Streams and iq put it on the
// topic's 3 partitions.
func TestGetStarted(t *testing.T) {
	brokers := os.Getenv("KAFKA_BROKERS")
	if brokers == "" {
		t.Fatal("embedded.go set no KAFKA_BROKERS")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := captureStdout(t, func() error { return run(ctx, strings.Split(brokers, ",")) })
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ key, value string }{{"alice", "signed up"}, {"bob", "signed up"}, {"alice", "paid"}} {
		want := fmt.Sprintf("%s: %s (partition %d,", m.key, m.value, iq.Partition([]byte(m.key), 3))
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// captureStdout returns what f prints on standard output, and f's error.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	r.Close()
	return out, ferr
}
