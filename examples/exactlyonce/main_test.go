package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestTxnWriterPart runs the program against the embedded broker that
// embedded.go starts: of three transactions of 50 orders, one aborted, a
// read_committed reader reads the 100 committed and none of the aborted
// (run fails if it does).
func TestTxnWriterPart(t *testing.T) {
	brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, brokers, false); err != nil {
		t.Fatal(err)
	}
}
