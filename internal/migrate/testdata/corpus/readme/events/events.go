package events

import "github.com/segmentio/kafka-go"

func Open(brokers []string) (*kafka.Writer, *kafka.Reader) {
	return &kafka.Writer{Addr: kafka.TCP(brokers...)}, kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "events"})
}
