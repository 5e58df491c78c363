// Package audit hands its Writer to a module the migration does not own.
package audit

import (
	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/migrate/testdata/corpus/thirdparty"
)

// Label labels w.
func Label(w *kafka.Writer) string { return thirdparty.Instrument(w) }
