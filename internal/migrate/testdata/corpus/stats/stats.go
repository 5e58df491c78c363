// Package stats keeps Writer and Reader stats in its own types and
// literals: a kafka.WriterStats{...} literal becomes an sdk.WriterStats
// holding it, as the parameters and fields it goes to become
// sdk.WriterStats.
package stats

import "github.com/segmentio/kafka-go"

// Totals are the stats kept.
type Totals struct {
	Last    kafka.WriterStats
	History []kafka.WriterStats
}

// Report returns the messages s counts.
func Report(s kafka.WriterStats) int64 { return s.Messages }

var zero = kafka.WriterStats{}

// Collect reports w's stats beside literal ones.
func Collect(w *kafka.Writer) (int64, Totals) {
	t := Totals{Last: w.Stats(), History: []kafka.WriterStats{{Messages: 1}, zero}}
	return Report(kafka.WriterStats{Messages: 2}) + Report(t.Last), t
}

// Empty is a Reader's stats of topic, before any read.
func Empty(topic string) *kafka.ReaderStats { return &kafka.ReaderStats{Topic: topic} }
