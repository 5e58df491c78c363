package sdk

// must.go holds the constructors shaped like kafka-go's, for code with no
// error path: a kafka.NewReader call in an expression, a &kafka.Writer{...}
// in a var block or a field initialiser (what `azkafka migrate` writes).

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// MustNewReader is NewReader in kafka.NewReader's shape, with no error
// result:
//
//	r := sdk.MustNewReader(kafka.ReaderConfig{...}) // was: kafka.NewReader(kafka.ReaderConfig{...})
//
// It panics exactly where kafka-go v0.4.51's kafka.NewReader panics (its
// ReaderConfig.Validate; ReadBackoffMax below ReadBackoffMin once
// defaulted; a negative QueueCapacity; with GroupID, its
// ConsumerGroupConfig.Validate: a negative or int32-overflowing
// HeartbeatInterval, SessionTimeout, RebalanceTimeout, JoinGroupBackoff
// or PartitionWatchInterval, a negative RetentionTime but -1ms, a
// StartOffset neither FirstOffset nor LastOffset), with an error that
// names the field and holds kafka-go's message.
//
// A config kafka.NewReader accepts it accepts too, as NewReader does: a
// value of a field the SDK ignores is ignored (a negative
// ReadBatchTimeout, RetentionTime, ReadBackoffMin or ReadBackoffMax;
// without GroupID a negative HeartbeatInterval, SessionTimeout,
// RebalanceTimeout, JoinGroupBackoff, PartitionWatchInterval or
// CommitInterval, any StartOffset), a MaxWait below 10ms (or negative)
// is 10ms, the engine's shortest fetch wait (kafka-go sends 0 ms, a busy
// poll), and with WatchPartitionChanges a PartitionWatchInterval above an
// hour is the engine's longest metadata refresh, an hour (new partitions
// are seen no later than asked). Config returns the values given.
//
// It panics, saying why, for the values the engine cannot honour:
//   - MaxWait above 24d20h31m23.647s: the fetch's int32 of milliseconds,
//     which kafka-go overflows too;
//   - MaxBytes above 715827883: a fetch response may exceed it by a
//     record batch (KIP-74), so the Reader reads responses of up to 1.5
//     times it, and the engine reads at most 1 GiB (kafka-go sends
//     MaxBytes of 2 GiB and more overflowed);
//   - with GroupID, SessionTimeout or RebalanceTimeout below 100ms (Kafka
//     refuses a session below group.min.session.timeout.ms, 6 s by
//     default), HeartbeatInterval above SessionTimeout (the session would
//     expire between heartbeats), a negative CommitInterval (kafka-go's
//     Reader panics in its commit loop once it joins the group);
//   - a Dialer ClientID the SDK cannot extend with its segments (see
//     WithClientID), invalid options or AZKAFKA_* variables (NewReader's
//     error, naming the option or the variable).
//
// The panic value is an error.
func MustNewReader(config kafka.ReaderConfig, opts ...Option) *Reader {
	if err := kafkaGoReaderPanic(config); err != nil {
		panic(fmt.Errorf("sdk: MustNewReader: invalid kafka.ReaderConfig (kafka.NewReader panics too): %w", err))
	}
	if err := engineRefuses(config); err != nil {
		panic(fmt.Errorf("sdk: MustNewReader: kafka.ReaderConfig: %w", err))
	}
	r, err := NewReader(config, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// readerFieldError is the kafka.ReaderConfig field MustNewReader panics
// for, and why.
type readerFieldError struct {
	Field string // the kafka.ReaderConfig field
	Err   error
}

func (e *readerFieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *readerFieldError) Unwrap() error { return e.Err }

// kafkaGoReaderPanic returns what kafka-go v0.4.51's NewReader panics
// with for c, nil where it returns a Reader. It runs kafka-go's own
// validation where kafka-go exports it.
func kafkaGoReaderPanic(c kafka.ReaderConfig) error {
	if err := c.Validate(); err != nil { // reader.go:630
		return &readerFieldError{validateField(c), err}
	}
	if c.ReadBackoffMin == 0 {
		c.ReadBackoffMin = defaultReaderReadBackoffMin
	}
	if c.ReadBackoffMax == 0 {
		c.ReadBackoffMax = defaultReaderReadBackoffMax
	}
	if c.ReadBackoffMax < c.ReadBackoffMin { // reader.go:675
		return &readerFieldError{"ReadBackoffMax", fmt.Errorf("ReadBackoffMax %d smaller than ReadBackoffMin %d", c.ReadBackoffMax, c.ReadBackoffMin)}
	}
	if c.QueueCapacity < 0 { // reader.go:703: make(chan readerMessage, config.QueueCapacity)
		return &readerFieldError{"QueueCapacity", errors.New("makechan: size out of range")}
	}
	if c.GroupID == "" {
		return nil
	}
	topics := c.GroupTopics
	if len(topics) == 0 {
		topics = []string{c.Topic}
	}
	balancers := c.GroupBalancers
	if len(balancers) == 0 {
		balancers = []kafka.GroupBalancer{kafka.RangeGroupBalancer{}, kafka.RoundRobinGroupBalancer{}}
	}
	cg := kafka.ConsumerGroupConfig{ // reader.go:724, NewConsumerGroup's Validate
		ID: c.GroupID, Brokers: c.Brokers, Dialer: c.Dialer, Topics: topics, GroupBalancers: balancers,
		HeartbeatInterval: c.HeartbeatInterval, PartitionWatchInterval: c.PartitionWatchInterval,
		WatchPartitionChanges: c.WatchPartitionChanges, SessionTimeout: c.SessionTimeout,
		RebalanceTimeout: c.RebalanceTimeout, JoinGroupBackoff: c.JoinGroupBackoff,
		RetentionTime: c.RetentionTime, StartOffset: c.StartOffset, Logger: c.Logger, ErrorLogger: c.ErrorLogger,
	}
	if err := cg.Validate(); err != nil {
		field, _, _ := strings.Cut(err.Error(), " ")
		if field == "PartitionWachInterval" { // kafka-go's spelling
			field = "PartitionWatchInterval"
		}
		return &readerFieldError{field, err}
	}
	return nil
}

// validateField names the field kafka.ReaderConfig.Validate refuses, in
// its order of checks (kafka-go v0.4.51 reader.go:528).
func validateField(c kafka.ReaderConfig) string {
	switch {
	case len(c.Brokers) == 0:
		return "Brokers"
	case c.Partition < 0 || c.Partition >= math.MaxInt32:
		return "Partition"
	case c.MinBytes < 0:
		return "MinBytes"
	case c.MaxBytes < 0:
		return "MaxBytes"
	case c.GroupID != "" && c.Partition != 0:
		return "Partition"
	case c.GroupID != "" && c.Topic == "" && len(c.GroupTopics) == 0:
		return "GroupTopics"
	case c.GroupID == "" && c.Topic == "":
		return "Topic"
	case c.MinBytes > c.MaxBytes:
		return "MinBytes"
	case c.ReadBackoffMax < 0:
		return "ReadBackoffMax"
	}
	return "ReadBackoffMin"
}

// Limits of the engine a kafka.ReaderConfig may exceed where kafka-go
// accepts it.
const (
	minReaderMaxWait  = 10 * time.Millisecond // franz-go's FetchMaxWait
	maxReaderMaxWait  = math.MaxInt32 * time.Millisecond
	maxReaderMaxBytes = 715827883 // the largest n with n + n/2 (the response floor) within franz-go's 1 GiB
	minGroupTimeout   = 100 * time.Millisecond
	maxMetadataMaxAge = time.Hour // franz-go's MetadataMaxAge
)

// engineRefuses returns why the engine cannot honour c, which kafka-go
// accepts; nil when it can.
func engineRefuses(c kafka.ReaderConfig) error {
	switch {
	case c.MaxWait > maxReaderMaxWait:
		return &readerFieldError{"MaxWait", fmt.Errorf("%v does not fit the fetch request's int32 of milliseconds (at most %v; kafka-go overflows it)", c.MaxWait, maxReaderMaxWait)}
	case c.MaxBytes > maxReaderMaxBytes:
		return &readerFieldError{"MaxBytes", fmt.Errorf("%d is above %d: a fetch response may exceed MaxBytes by a record batch (KIP-74), so the Reader reads responses of up to 1.5 times it, and its engine reads at most 1 GiB", c.MaxBytes, maxReaderMaxBytes)}
	}
	if c.GroupID == "" {
		return nil
	}
	session, rebalance, heartbeat := c.SessionTimeout, c.RebalanceTimeout, c.HeartbeatInterval
	if session == 0 {
		session = defaultReaderSession
	}
	if rebalance == 0 {
		rebalance = defaultReaderRebalance
	}
	if heartbeat == 0 {
		heartbeat = defaultReaderHeartbeat
	}
	switch {
	case session < minGroupTimeout:
		return &readerFieldError{"SessionTimeout", fmt.Errorf("%v is below 100ms, the shortest the SDK's engine takes (Kafka refuses a session below group.min.session.timeout.ms, 6s by default)", session)}
	case rebalance < minGroupTimeout:
		return &readerFieldError{"RebalanceTimeout", fmt.Errorf("%v is below 100ms, the shortest the SDK's engine takes", rebalance)}
	case heartbeat > session:
		return &readerFieldError{"HeartbeatInterval", fmt.Errorf("%v is longer than SessionTimeout %v: the member's session would expire between heartbeats", heartbeat, session)}
	case c.CommitInterval < 0:
		return &readerFieldError{"CommitInterval", fmt.Errorf("%v is negative: kafka-go's Reader panics in its commit loop once it joins the group; 0 commits synchronously, more every interval", c.CommitInterval)}
	}
	return nil
}

// engineConfig sets in c, a config kafka.NewReader accepts, the values
// the engine takes: fields the SDK ignores that kafka-go would refuse
// otherwise get their defaults (negative durations; without GroupID a
// StartOffset neither FirstOffset nor LastOffset, which kafka-go ignores
// too), a MaxWait below 10ms becomes 10ms (the engine's shortest fetch
// wait; kafka-go asks the broker for 0 ms, a busy poll) and
// PartitionWatchInterval is capped at the engine's longest metadata
// refresh. Config still returns the values given (showGiven).
func engineConfig(c *kafka.ReaderConfig) {
	zeroNegative := func(d *time.Duration) {
		if *d < 0 {
			*d = 0
		}
	}
	zeroNegative(&c.ReadBatchTimeout)
	zeroNegative(&c.RetentionTime) // with GroupID only -1ms, kafka-go's default, comes here
	zeroNegative(&c.ReadBackoffMin)
	zeroNegative(&c.ReadBackoffMax)
	if c.MaxWait != 0 && c.MaxWait < minReaderMaxWait {
		c.MaxWait = minReaderMaxWait
	}
	if c.GroupID == "" {
		for _, d := range []*time.Duration{&c.HeartbeatInterval, &c.SessionTimeout, &c.RebalanceTimeout,
			&c.JoinGroupBackoff, &c.PartitionWatchInterval, &c.CommitInterval} {
			zeroNegative(d)
		}
		if c.StartOffset != kafka.FirstOffset && c.StartOffset != kafka.LastOffset {
			c.StartOffset = 0
		}
	} else if c.WatchPartitionChanges && c.PartitionWatchInterval > maxMetadataMaxAge {
		c.PartitionWatchInterval = maxMetadataMaxAge
	}
}

// showGiven sets in shown, what Config returns, the values of given that
// engineConfig changed into those of passed.
func showGiven(shown *kafka.ReaderConfig, passed, given kafka.ReaderConfig) {
	for _, f := range []struct{ shown, passed, given *time.Duration }{
		{&shown.ReadBatchTimeout, &passed.ReadBatchTimeout, &given.ReadBatchTimeout},
		{&shown.RetentionTime, &passed.RetentionTime, &given.RetentionTime},
		{&shown.ReadBackoffMin, &passed.ReadBackoffMin, &given.ReadBackoffMin},
		{&shown.ReadBackoffMax, &passed.ReadBackoffMax, &given.ReadBackoffMax},
		{&shown.MaxWait, &passed.MaxWait, &given.MaxWait},
		{&shown.HeartbeatInterval, &passed.HeartbeatInterval, &given.HeartbeatInterval},
		{&shown.SessionTimeout, &passed.SessionTimeout, &given.SessionTimeout},
		{&shown.RebalanceTimeout, &passed.RebalanceTimeout, &given.RebalanceTimeout},
		{&shown.JoinGroupBackoff, &passed.JoinGroupBackoff, &given.JoinGroupBackoff},
		{&shown.PartitionWatchInterval, &passed.PartitionWatchInterval, &given.PartitionWatchInterval},
		{&shown.CommitInterval, &passed.CommitInterval, &given.CommitInterval},
	} {
		if *f.passed != *f.given {
			*f.shown = *f.given
		}
	}
	if passed.StartOffset != given.StartOffset {
		shown.StartOffset = given.StartOffset
	}
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
