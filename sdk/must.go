package sdk

// must.go holds the constructors shaped like kafka-go's, for code with no
// error path: a kafka.NewReader call in an expression, a &kafka.Writer{...}
// in a var block or a field initialiser (what `azkafka migrate` writes).

import "github.com/segmentio/kafka-go"

// MustNewReader is NewReader in kafka.NewReader's shape, with no error
// result:
//
//	r := sdk.MustNewReader(kafka.ReaderConfig{...}) // was: kafka.NewReader(kafka.ReaderConfig{...})
//
// It panics where NewReader returns an error: for an invalid
// kafka.ReaderConfig (where kafka.NewReader panics too, with an error
// naming the field), and for invalid options or AZKAFKA_* variables (the
// error names the option or the variable). The panic value is that error.
func MustNewReader(config kafka.ReaderConfig, opts ...Option) *Reader {
	r, err := NewReader(config, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// MustNewWriter is NewWriter in the shape of a &kafka.Writer{...}
// literal, with no error result, for a var block or a field initialiser:
//
//	var w = sdk.MustNewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events"}) // was: &kafka.Writer{...}
//
// It panics where NewWriter returns an error (a kafka.Writer field it
// refuses, invalid options or AZKAFKA_* variables; the error names the
// field, option or variable), where a &kafka.Writer{...} literal cannot
// fail. The panic value is that error.
func MustNewWriter(w *kafka.Writer, opts ...Option) *Writer {
	sw, err := NewWriter(w, opts...)
	if err != nil {
		panic(err)
	}
	return sw
}

// MustNewAZAwareDialer is NewAZAwareDialer in the shape of a
// &kafka.Dialer{...} literal, with no error result (what `azkafka migrate
// --dialers` writes). It panics with NewAZAwareDialer's error.
func MustNewAZAwareDialer(base *kafka.Dialer, opts ...Option) *kafka.Dialer {
	d, err := NewAZAwareDialer(base, opts...)
	if err != nil {
		panic(err)
	}
	return d
}

// MustNewTransport is NewTransport in the shape of a &kafka.Transport{...}
// literal, with no error result (what `azkafka migrate --dialers`
// writes). It panics with NewTransport's error.
func MustNewTransport(base *kafka.Transport, opts ...Option) *kafka.Transport {
	t, err := NewTransport(base, opts...)
	if err != nil {
		panic(err)
	}
	return t
}
