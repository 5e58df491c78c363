// Package service is written as kafka-go services are: an HTTP handler
// writing through a shared *kafka.Writer, and a group Reader that fetches,
// processes and commits.
package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/segmentio/kafka-go"
)

// Brokers is where the service's clients connect.
var Brokers = []string{"localhost:9092"}

var (
	writer *kafka.Writer
	topic  = "orders"
)

// Setup builds the shared Writer.
func Setup() {
	writer = &kafka.Writer{
		Addr:         kafka.TCP(Brokers...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
	}
}

// Handler writes the request body as one message keyed by ?key=.
func Handler(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msg := kafka.Message{Key: []byte(req.URL.Query().Get("key")), Value: body}
	if err := writer.WriteMessages(req.Context(), msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	report(writer.Stats())
	w.WriteHeader(http.StatusAccepted)
}

var written int64

func report(s kafka.WriterStats) { written += s.Messages }

// Consume reads n messages in group, processing each with process before
// committing it.
func Consume(ctx context.Context, group string, n int, process func(kafka.Message) error) error {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: Brokers, GroupID: group, Topic: topic})
	defer r.Close()
	for i := 0; i < n; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if err := process(m); err != nil {
			return err
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	return readerStats(r)
}

func readerStats(r *kafka.Reader) error {
	s := r.Stats()
	if s.Messages == 0 {
		return fmt.Errorf("no message in %s", strings.ToUpper(s.Topic))
	}
	return nil
}

// Close closes the shared Writer.
func Close() error { return writer.Close() }
