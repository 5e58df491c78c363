// Package outsideapi hands its Writer and its stats to another module's
// API in each way that API takes kafka-go's types (a kafka.WriterStats
// parameter, a []*kafka.Writer, a func(*kafka.Writer) variable, a
// *kafka.Writer variable, an interface with a method returning one, any), and
// returns that module's Writer as its own: no rewrite is safe here.
package outsideapi

import (
	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/migrate/testdata/corpus/thirdparty"
)

type service struct{ w *kafka.Writer }

func (s *service) Writer() *kafka.Writer { return s.w }

// Wire builds a Writer and hands it over.
func Wire(brokers []string) (*kafka.Writer, []string) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "audit"}
	_ = thirdparty.Report(w.Stats())
	topics := thirdparty.Topics([]*kafka.Writer{w})
	thirdparty.OnClose = func(*kafka.Writer) {}
	thirdparty.Default = w
	_ = thirdparty.Register(&service{w: w})
	_ = thirdparty.Describe(w) // any: code there may assert *kafka.Writer
	return w, topics
}

// Default returns the other module's Writer.
func Default() *kafka.Writer { return thirdparty.Default }
