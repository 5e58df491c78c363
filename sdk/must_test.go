package sdk_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

// panicOf returns what f panics with, nil when it returns.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestMustNewReaderPanicsWhereKafkaGoPanics: MustNewReader panics for the
// configs kafka.NewReader panics for, with an error that names the field
// as kafka-go's does, and returns a Reader for a valid one.
func TestMustNewReaderPanicsWhereKafkaGoPanics(t *testing.T) {
	for _, cfg := range []kafka.ReaderConfig{
		{Topic: "t"},                       // no brokers
		{Brokers: []string{"127.0.0.1:1"}}, // no topic
		{Brokers: []string{"127.0.0.1:1"}, Topic: "t", GroupID: "g", Partition: 2},
		{Brokers: []string{"127.0.0.1:1"}, Topic: "t", ReadBackoffMin: 2, ReadBackoffMax: 1},
	} {
		kp := panicOf(func() { kafka.NewReader(cfg).Close() })
		sp := panicOf(func() { sdk.MustNewReader(cfg, testOptions(t)...).Close() })
		if kp == nil || sp == nil {
			t.Errorf("%+v: kafka.NewReader panics with %v, MustNewReader with %v; want both to panic", cfg, kp, sp)
			continue
		}
		ke, _ := kp.(error)
		se, ok := sp.(error)
		if !ok || ke == nil || !sameFields(se.Error(), ke.Error()) {
			t.Errorf("%+v: MustNewReader panicked with %v, want an error naming what kafka-go's %q names", cfg, sp, ke)
		}
	}
	r := sdk.MustNewReader(kafka.ReaderConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, testOptions(t)...)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMustNewWriter: MustNewWriter returns a Writer where NewWriter does,
// and panics with NewWriter's error (naming the option) where it fails.
func TestMustNewWriter(t *testing.T) {
	w := sdk.MustNewWriter(&kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: "t"}, testOptions(t)...)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := panicOf(func() {
		sdk.MustNewWriter(&kafka.Writer{Addr: kafka.TCP("127.0.0.1:1")}, testOptions(t, sdk.WithMaxResponseBytes(1))...)
	})
	err, ok := p.(error)
	if !ok || !strings.Contains(err.Error(), "WithMaxResponseBytes(1)") {
		t.Fatalf("MustNewWriter with a bad option panicked with %v, want the error naming it", p)
	}
	var target interface{ Unwrap() error }
	if !errors.As(err, &target) {
		t.Errorf("the panic value %T does not wrap the cause", err)
	}
}

// sameFields reports whether msg names every config field kafka-go's
// message names (its CamelCase words), or, naming none, holds it whole.
func sameFields(msg, kafkaGo string) bool {
	fields := regexp.MustCompile(`\b[A-Z][a-z]+[A-Z][A-Za-z]*\b`).FindAllString(kafkaGo, -1)
	if len(fields) == 0 {
		return strings.Contains(msg, kafkaGo)
	}
	for _, f := range fields {
		if !strings.Contains(msg, f) {
			return false
		}
	}
	return true
}

// TestMustNewDialerAndTransport: the Must forms return NewAZAwareDialer's
// and NewTransport's results, and panic with their errors.
func TestMustNewDialerAndTransport(t *testing.T) {
	d := sdk.MustNewAZAwareDialer(&kafka.Dialer{ClientID: "app"}, testOptions(t)...)
	if !strings.HasPrefix(d.ClientID, "app,warpstream_session_id=") {
		t.Errorf("Dialer ClientID %q", d.ClientID)
	}
	tr := sdk.MustNewTransport(&kafka.Transport{ClientID: "app"}, testOptions(t)...)
	if !strings.HasPrefix(tr.ClientID, "app,warpstream_session_id=") {
		t.Errorf("Transport ClientID %q", tr.ClientID)
	}
	for name, f := range map[string]func(){
		"MustNewAZAwareDialer": func() { sdk.MustNewAZAwareDialer(nil, testOptions(t, sdk.WithSessionID("nope"))...) },
		"MustNewTransport":     func() { sdk.MustNewTransport(nil, testOptions(t, sdk.WithSessionID("nope"))...) },
	} {
		if err, ok := panicOf(f).(error); !ok || !strings.Contains(err.Error(), `WithSessionID("nope")`) {
			t.Errorf("%s with a bad option panicked with %v", name, err)
		}
	}
}
