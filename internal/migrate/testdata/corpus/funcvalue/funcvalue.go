// Package funcvalue keeps kafka.NewReader as a function value, whose type
// the rewrite of its calls cannot follow: it is left as it is.
package funcvalue

import "github.com/segmentio/kafka-go"

var open = kafka.NewReader

var newReader func(kafka.ReaderConfig) *kafka.Reader = kafka.NewReader

// Open opens a Reader of topic.
func Open(brokers []string, topic string) (*kafka.Reader, *kafka.Reader) {
	cfg := kafka.ReaderConfig{Brokers: brokers, Topic: topic}
	return open(cfg), newReader(cfg)
}
