// Package newwriter builds its Writer with the deprecated
// kafka.NewWriter(kafka.WriterConfig{...}), which no &kafka.Writer{...}
// is exactly: it is left as it is.
package newwriter

import "github.com/segmentio/kafka-go"

// New returns the Writer of topic.
func New(brokers []string, topic string) *kafka.Writer {
	return kafka.NewWriter(kafka.WriterConfig{Brokers: brokers, Topic: topic, Balancer: &kafka.LeastBytes{}})
}
