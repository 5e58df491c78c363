package sdk_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

// panicOf returns what f panics with, nil when it returns.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestMustNewReaderAgainstKafkaGo: over a table of configs, compared with
// kafka-go v0.4.51's NewReader (both recovered): MustNewReader panics, and
// NewReader returns an error, where kafka.NewReader panics, naming the
// field and holding kafka-go's message; where kafka-go returns a Reader, so
// do both, their Config showing what kafka-go's shows; but for the values
// the engine cannot honour (engine set), where they fail naming the field
// and saying why.
func TestMustNewReaderAgainstKafkaGo(t *testing.T) {
	brokers := []string{"127.0.0.1:1"}
	part := func(c kafka.ReaderConfig) kafka.ReaderConfig { c.Brokers, c.Topic = brokers, "t"; return c }
	group := func(c kafka.ReaderConfig) kafka.ReaderConfig {
		c.Brokers, c.Topic, c.GroupID = brokers, "t", "g"
		return c
	}
	const ms = time.Millisecond
	for _, tc := range []struct {
		name   string
		cfg    kafka.ReaderConfig
		field  string // the field named when kafka-go panics, or (engine) when the SDK does
		engine string // a part of why the engine cannot honour a value kafka-go takes
	}{
		// kafka.NewReader panics: ReaderConfig.Validate.
		{name: "no brokers", cfg: kafka.ReaderConfig{Topic: "t"}, field: "Brokers"},
		{name: "no topic", cfg: kafka.ReaderConfig{Brokers: brokers}, field: "Topic"},
		{name: "partition -1", cfg: part(kafka.ReaderConfig{Partition: -1}), field: "Partition"},
		{name: "group and partition", cfg: group(kafka.ReaderConfig{Partition: 2}), field: "Partition"},
		{name: "group without topic", cfg: kafka.ReaderConfig{Brokers: brokers, GroupID: "g"}, field: "GroupTopics"},
		{name: "MinBytes -1", cfg: part(kafka.ReaderConfig{MinBytes: -1}), field: "MinBytes"},
		{name: "MaxBytes -1", cfg: part(kafka.ReaderConfig{MaxBytes: -1}), field: "MaxBytes"},
		{name: "MinBytes above unset MaxBytes", cfg: part(kafka.ReaderConfig{MinBytes: 5}), field: "MinBytes"},
		{name: "ReadBackoffMax -1", cfg: part(kafka.ReaderConfig{ReadBackoffMax: -1}), field: "ReadBackoffMax"},
		{name: "ReadBackoffMin -1", cfg: part(kafka.ReaderConfig{ReadBackoffMin: -1}), field: "ReadBackoffMin"},
		// NewReader's own checks.
		{name: "ReadBackoffMax below Min", cfg: part(kafka.ReaderConfig{ReadBackoffMin: 2, ReadBackoffMax: 1}), field: "ReadBackoffMax"},
		{name: "ReadBackoffMin above default Max", cfg: part(kafka.ReaderConfig{ReadBackoffMin: 2 * time.Second}), field: "ReadBackoffMax"},
		{name: "QueueCapacity -1", cfg: part(kafka.ReaderConfig{QueueCapacity: -1}), field: "QueueCapacity"},
		// ConsumerGroupConfig.Validate.
		{name: "group HeartbeatInterval -1", cfg: group(kafka.ReaderConfig{HeartbeatInterval: -1}), field: "HeartbeatInterval"},
		{name: "group SessionTimeout overflow", cfg: group(kafka.ReaderConfig{SessionTimeout: math.MaxInt32 * ms}), field: "SessionTimeout"},
		{name: "group RebalanceTimeout -1", cfg: group(kafka.ReaderConfig{RebalanceTimeout: -1}), field: "RebalanceTimeout"},
		{name: "group JoinGroupBackoff -1", cfg: group(kafka.ReaderConfig{JoinGroupBackoff: -1}), field: "JoinGroupBackoff"},
		{name: "group RetentionTime -2ms", cfg: group(kafka.ReaderConfig{RetentionTime: -2 * ms}), field: "RetentionTime"},
		{name: "group PartitionWatchInterval -1", cfg: group(kafka.ReaderConfig{PartitionWatchInterval: -1}), field: "PartitionWatchInterval"},
		{name: "group StartOffset 5", cfg: group(kafka.ReaderConfig{StartOffset: 5}), field: "StartOffset"},

		// Both return a Reader.
		{name: "partition reader", cfg: part(kafka.ReaderConfig{})},
		{name: "group reader", cfg: group(kafka.ReaderConfig{GroupTopics: []string{"a", "b"}, Topic: ""})},
		{name: "CommitInterval -1 without group", cfg: part(kafka.ReaderConfig{CommitInterval: -1})},
		{name: "fields of groups negative without group", cfg: part(kafka.ReaderConfig{HeartbeatInterval: -1, SessionTimeout: -1,
			RebalanceTimeout: -1, JoinGroupBackoff: -1, PartitionWatchInterval: -1, RetentionTime: -5 * ms, StartOffset: 5})},
		{name: "group RetentionTime -1ms", cfg: group(kafka.ReaderConfig{RetentionTime: -ms})},
		{name: "ReadBatchTimeout -1", cfg: part(kafka.ReaderConfig{ReadBatchTimeout: -1})},
		{name: "ReadLagInterval -1", cfg: part(kafka.ReaderConfig{ReadLagInterval: -1})},
		{name: "group PartitionWatchInterval 2h", cfg: group(kafka.ReaderConfig{WatchPartitionChanges: true, PartitionWatchInterval: 2 * time.Hour})},
		{name: "MaxWait 10ms", cfg: part(kafka.ReaderConfig{MaxWait: 10 * ms})},
		{name: "MaxBytes at the engine's limit", cfg: part(kafka.ReaderConfig{MaxBytes: 715827883})},
		{name: "group SessionTimeout 100ms", cfg: group(kafka.ReaderConfig{SessionTimeout: 100 * ms, HeartbeatInterval: 100 * ms, RebalanceTimeout: 100 * ms})},
		// Below the engine's shortest fetch wait: 10ms.
		{name: "MaxWait 500µs", cfg: part(kafka.ReaderConfig{MaxWait: 500 * time.Microsecond})},
		{name: "MaxWait 9.999ms", cfg: part(kafka.ReaderConfig{MaxWait: 10*ms - 1})},
		{name: "MaxWait -1", cfg: part(kafka.ReaderConfig{MaxWait: -1})},
		{name: "StartOffset 3 without group", cfg: part(kafka.ReaderConfig{StartOffset: 3})},
		{name: "StartOffset -3 without group", cfg: part(kafka.ReaderConfig{StartOffset: -3})},

		// kafka-go takes them; the engine cannot honour them.
		{name: "MaxWait 30 days", cfg: part(kafka.ReaderConfig{MaxWait: 30 * 24 * time.Hour}), field: "MaxWait", engine: "int32 of milliseconds"},
		{name: "MaxBytes 2 GiB", cfg: part(kafka.ReaderConfig{MaxBytes: 2 << 30}), field: "MaxBytes", engine: "at most 1 GiB"},
		{name: "MaxBytes above the engine's limit", cfg: part(kafka.ReaderConfig{MaxBytes: 715827884}), field: "MaxBytes", engine: "at most 1 GiB"},
		{name: "group SessionTimeout 50ms", cfg: group(kafka.ReaderConfig{SessionTimeout: 50 * ms, HeartbeatInterval: 10 * ms}), field: "SessionTimeout", engine: "below 100ms"},
		{name: "group RebalanceTimeout 50ms", cfg: group(kafka.ReaderConfig{RebalanceTimeout: 50 * ms}), field: "RebalanceTimeout", engine: "below 100ms"},
		{name: "group HeartbeatInterval above SessionTimeout", cfg: group(kafka.ReaderConfig{SessionTimeout: time.Second}), field: "HeartbeatInterval", engine: "expire between heartbeats"},
		{name: "group CommitInterval -1", cfg: group(kafka.ReaderConfig{CommitInterval: -1}), field: "CommitInterval", engine: "panics in its commit loop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kafkaGo kafka.ReaderConfig
			kp := panicOf(func() { r := kafka.NewReader(tc.cfg); kafkaGo = r.Config(); r.Close() })
			// MustNewReader, then NewReader: its error is Must's panic.
			for _, ctor := range []string{"MustNewReader", "NewReader"} {
				var ours kafka.ReaderConfig
				sp := panicOf(func() {
					var r *sdk.Reader
					if ctor == "NewReader" {
						var err error
						if r, err = sdk.NewReader(tc.cfg, testOptions(t)...); err != nil {
							panic(err)
						}
					} else {
						r = sdk.MustNewReader(tc.cfg, testOptions(t)...)
					}
					ours = r.Config()
					r.Close()
				})
				checkAgainstKafkaGo(t, ctor, tc.field, tc.engine, kp, sp, kafkaGo, ours)
			}
		})
	}
}

// checkAgainstKafkaGo compares what an SDK constructor did (sp, what it
// panicked with, or ours, its Reader's Config) with kafka.NewReader (kp,
// kafkaGo).
func checkAgainstKafkaGo(t *testing.T, ctor, field, engine string, kp, sp any, kafkaGo, ours kafka.ReaderConfig) {
	t.Helper()
	se, _ := sp.(error)
	switch {
	case kp != nil && engine != "":
		t.Errorf("kafka.NewReader panics too, with %v", kp)
	case kp != nil:
		ke, _ := kp.(error)
		if se == nil || ke == nil || !strings.Contains(se.Error(), field+": "+ke.Error()) {
			t.Errorf("kafka.NewReader panics with %v; %s fails with %v, want an error naming %s and holding kafka-go's message", kp, ctor, sp, field)
		}
	case engine != "":
		if se == nil || !strings.Contains(se.Error(), field+": ") || !strings.Contains(se.Error(), engine) {
			t.Errorf("%s fails with %v, want an error naming %s and saying %q", ctor, sp, field, engine)
		}
	case sp != nil:
		t.Errorf("kafka.NewReader returns a Reader; %s fails with %v", ctor, sp)
	default:
		for _, f := range []struct {
			name      string
			kafka, us any
		}{
			{"ReadBatchTimeout", kafkaGo.ReadBatchTimeout, ours.ReadBatchTimeout}, {"RetentionTime", kafkaGo.RetentionTime, ours.RetentionTime},
			{"HeartbeatInterval", kafkaGo.HeartbeatInterval, ours.HeartbeatInterval}, {"SessionTimeout", kafkaGo.SessionTimeout, ours.SessionTimeout},
			{"RebalanceTimeout", kafkaGo.RebalanceTimeout, ours.RebalanceTimeout}, {"JoinGroupBackoff", kafkaGo.JoinGroupBackoff, ours.JoinGroupBackoff},
			{"PartitionWatchInterval", kafkaGo.PartitionWatchInterval, ours.PartitionWatchInterval},
			{"CommitInterval", kafkaGo.CommitInterval, ours.CommitInterval}, {"StartOffset", kafkaGo.StartOffset, ours.StartOffset},
			{"MaxWait", kafkaGo.MaxWait, ours.MaxWait}, {"MaxBytes", kafkaGo.MaxBytes, ours.MaxBytes},
			{"ReadBackoffMin", kafkaGo.ReadBackoffMin, ours.ReadBackoffMin}, {"ReadBackoffMax", kafkaGo.ReadBackoffMax, ours.ReadBackoffMax},
		} {
			if f.kafka != f.us {
				t.Errorf("%s: Config().%s = %v, kafka-go's %v", ctor, f.name, f.us, f.kafka)
			}
		}
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
