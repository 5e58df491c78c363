// Package usehandoff takes its Writer from handoff, which the migration
// leaves as it is: so it is left too, to keep building.
package usehandoff

import (
	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/migrate/testdata/corpus/handoff"
)

// Label builds handoff's Writer and returns its label.
func Label(brokers []string) string {
	var w *kafka.Writer
	w, label := handoff.New(brokers, "t")
	defer w.Close()
	return label
}
