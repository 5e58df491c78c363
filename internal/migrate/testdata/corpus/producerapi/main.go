// Command producerapi is shaped like kafka-go's examples/producer-api,
// written anew (see the corpus's doc in migrate_test.go): an HTTP endpoint
// writing each request's body to a topic through one shared Writer.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/segmentio/kafka-go"
)

// newWriter is the endpoint's shared Writer.
func newWriter(brokers, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr:     kafka.TCP(strings.Split(brokers, ",")...),
		Topic:    topic,
		Balancer: &kafka.LeastBytes{},
	}
}

// produce writes each request's body, keyed by the client's address.
func produce(w *kafka.Writer) http.HandlerFunc {
	return func(rw http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		msg := kafka.Message{Key: []byte(req.RemoteAddr), Value: body}
		if err := w.WriteMessages(req.Context(), msg); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(rw, "queued")
	}
}

func main() {
	w := newWriter(os.Getenv("KAFKA_BROKERS"), os.Getenv("KAFKA_TOPIC"))
	defer w.Close()
	http.HandleFunc("/", produce(w))
	if err := http.ListenAndServe(":8080", nil); err != nil {
		log.Print(err)
	}
}
