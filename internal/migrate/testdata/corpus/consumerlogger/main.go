// Command consumerlogger is shaped like kafka-go's
// examples/consumer-logger, written anew (see the corpus's doc in
// migrate_test.go): a group Reader whose loop logs every message it reads.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/segmentio/kafka-go"
)

// newReader is the group's Reader of topic.
func newReader(brokers, topic, group string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers:  strings.Split(brokers, ","),
		GroupID:  group,
		Topic:    topic,
		MaxBytes: 10e6, // 10 MB
	})
}

// logMessages logs to out each message r reads, until ctx ends, r fails
// or n messages were read (n < 0: no limit).
func logMessages(ctx context.Context, r *kafka.Reader, out io.Writer, n int) error {
	for i := 0; n < 0 || i < n; i++ {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s/%d@%d: %s = %s\n", m.Topic, m.Partition, m.Offset, m.Key, m.Value)
	}
	return nil
}

func main() {
	r := newReader(os.Getenv("KAFKA_BROKERS"), os.Getenv("KAFKA_TOPIC"), os.Getenv("KAFKA_GROUP"))
	defer r.Close()
	if err := logMessages(context.Background(), r, os.Stdout, -1); err != nil {
		log.Print(err)
	}
}
