// Package holder keeps both clients in a struct built with field
// initialisers, behind an interface the module defines.
package holder

import (
	"context"

	kafkago "github.com/segmentio/kafka-go"
)

// Producer is what the application needs of a Writer.
type Producer interface {
	WriteMessages(ctx context.Context, msgs ...kafkago.Message) error
	Close() error
}

var _ Producer = (*kafkago.Writer)(nil)

// Clients holds a Writer and a Reader.
type Clients struct {
	W *kafkago.Writer
	R *kafkago.Reader
	P Producer
}

// New builds the clients for topic.
func New(brokers []string, topic string) *Clients {
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers...), Topic: topic, RequiredAcks: kafkago.RequireAll}
	return &Clients{
		W: w,
		R: kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic}),
		P: w,
	}
}

// Echo writes v and reads it back.
func (c *Clients) Echo(ctx context.Context, v string) (string, error) {
	if err := c.P.WriteMessages(ctx, kafkago.Message{Value: []byte(v)}); err != nil {
		return "", err
	}
	m, err := c.R.ReadMessage(ctx)
	return string(m.Value), err
}

// Close closes both.
func (c *Clients) Close() {
	c.W.Close()
	c.R.Close()
}
