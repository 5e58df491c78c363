// Package thirdparty stands for a module the migration does not own: it
// takes kafka-go's own Writer.
package thirdparty

import "github.com/segmentio/kafka-go"

// Instrument records w's topic.
func Instrument(w *kafka.Writer) string { return "instrumented " + w.Topic }

// Holder keeps a Writer.
type Holder struct{ W *kafka.Writer }
