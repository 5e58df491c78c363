// Package handoff passes its Writer to another module, inspects it with
// reflect and reads its fields: no rewrite is safe here.
package handoff

import (
	"reflect"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/migrate/testdata/corpus/thirdparty"
)

// New builds a Writer and hands it to thirdparty.
func New(brokers []string, topic string) (*kafka.Writer, string) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic}
	label := thirdparty.Instrument(w)
	_ = reflect.TypeOf(w)
	return w, label + " " + w.Topic
}
