// Package thirdparty stands for a module the migration does not own: its
// API takes and holds kafka-go's own types.
package thirdparty

import "github.com/segmentio/kafka-go"

// Instrument records w's topic.
func Instrument(w *kafka.Writer) string { return "instrumented " + w.Topic }

// Holder keeps a Writer.
type Holder struct{ W *kafka.Writer }

// Report takes a Writer's stats.
func Report(s kafka.WriterStats) int64 { return s.Messages }

// Topics lists the Writers' topics.
func Topics(ws []*kafka.Writer) (topics []string) {
	for _, w := range ws {
		topics = append(topics, w.Topic)
	}
	return topics
}

// OnClose is called with each Writer closed.
var OnClose func(*kafka.Writer)

// Default is the application's Writer.
var Default *kafka.Writer

// WriterSource is what has a Writer.
type WriterSource interface{ Writer() *kafka.Writer }

// Register keeps s.
func Register(s WriterSource) string { return s.Writer().Topic }

// Describe takes any value.
func Describe(v any) string { return "described" }
