// Package shadow names a parameter and a variable sdk, where the rewrite
// refers to the SDK's package: the file imports it as azsdk.
package shadow

import "github.com/segmentio/kafka-go"

// New returns a Writer of topic sdk.
func New(sdk string) *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: sdk}
}

// Open returns a Reader of topic "t".
func Open(brokers []string) *kafka.Reader {
	sdk := "t"
	return kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: sdk})
}
