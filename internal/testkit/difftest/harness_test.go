package difftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// dropping is kafka-go's Writer that silently drops every second message
// and returns nil: a broken drop-in the harness must catch.
type dropping struct{ *kafka.Writer }

func (d dropping) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	var keep []kafka.Message
	for i, m := range msgs {
		if i%2 == 0 {
			keep = append(keep, m)
		}
	}
	return d.Writer.WriteMessages(ctx, keep...)
}

// wrapping is kafka-go's Writer whose errors are wrapped in a way that
// hides them from errors.Is, as a careless drop-in would.
type wrapping struct{ *kafka.Writer }

func (w wrapping) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if err := w.Writer.WriteMessages(ctx, msgs...); err != nil {
		return errors.New("wrapped: " + err.Error())
	}
	return nil
}

// TestHarnessCatchesBrokenDropIns runs scenarios against copies of
// kafka-go that lose messages or hide error shapes: the harness must
// report a difference for each (it can fail).
func TestHarnessCatchesBrokenDropIns(t *testing.T) {
	scenarios := map[string]Scenario{}
	for _, sc := range Scenarios() {
		scenarios[sc.Name] = sc
	}
	for _, tc := range []struct {
		name     string
		scenario string
		wrap     func(*kafka.Writer) Writer
		want     string // in the unexplained difference's step
	}{
		{"drops messages", "writer/fields/Hash/acks=-1", func(w *kafka.Writer) Writer { return dropping{w} }, "stored"},
		{"hides error codes", "writer/unknown-topic", func(w *kafka.Writer) Writer { return wrapping{w} }, "WriteMessages"},
		{"hides ctx errors", "writer/canceled-before", func(w *kafka.Writer) Writer { return wrapping{w} }, "WriteMessages canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc, ok := scenarios[tc.scenario]
			if !ok {
				t.Fatalf("no scenario %q", tc.scenario)
			}
			broken := KafkaGoFactory()
			broken.Impl = SDK
			ref := broken.NewWriter
			broken.NewWriter = func(w *kafka.Writer) (Writer, error) {
				got, err := ref(w)
				if err != nil {
					return nil, err
				}
				return tc.wrap(got.(*kafka.Writer)), nil
			}
			res, _ := runPair(t, Embedded(), sc, KafkaGoFactory(), broken)
			var steps []string
			for _, d := range res.Unexplained {
				steps = append(steps, d.Step)
			}
			if !strings.Contains(fmt.Sprint(steps), tc.want) {
				t.Fatalf("differences at %v; want one at %q", steps, tc.want)
			}
		})
	}
	// The same scenarios with kafka-go on both sides differ nowhere.
	res, _ := runPair(t, Embedded(), scenarios["writer/unknown-topic"], KafkaGoFactory(), KafkaGoFactory())
	if len(res.Unexplained) != 0 || res.Steps == 0 {
		t.Fatalf("kafka-go against itself: %d steps, differences %v", res.Steps, res.Unexplained)
	}
}

// TestShape checks the shapes of the errors kafka-go programs test.
func TestShape(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "nil"},
		{io.EOF, "error{io.EOF}"},
		{fmt.Errorf("x: %w", context.Canceled), "error{context.Canceled}"},
		{kafka.UnknownTopicOrPartition, "error{kafka.Error(3 Unknown Topic Or Partition)}"},
		{kafka.WriteErrors{nil, io.EOF, io.EOF}, "error{WriteErrors[3]{0:nil 1-2:error{io.EOF}}}"},
		{kafka.MessageTooLargeError{Remaining: make([]kafka.Message, 2)}, "error{MessageTooLargeError(remaining=2) kafka.Error(10 Message Size Too Large)}"},
		{errors.New("plain"), "error"},
	} {
		if got := Shape(tc.err); got != tc.want {
			t.Errorf("Shape(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestKafkaGoReaderStartsInOrder: kafka-go's Reader, as the harness makes
// it, takes SetOffset after SetOffset with no message between (each
// starting a partition goroutine that reads what the next one writes:
// under -race, kafka-go alone reports that race) and then reads from the
// last offset set.
func TestKafkaGoReaderStartsInOrder(t *testing.T) {
	c := Embedded()(t, KafkaGo)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.CreateTopic(ctx, "t", 1); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "t", Transport: &kafka.Transport{}}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 20 {
		msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	r, err := KafkaGoFactory().NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "t", MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	}
	for o := range int64(20) {
		if err := r.SetOffset(o); err != nil {
			t.Fatalf("SetOffset(%d): %v", o, err)
		}
	}
	if err := r.SetOffsetAt(ctx, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetOffset(17); err != nil {
		t.Fatal(err)
	}
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Offset != 17 || string(m.Value) != "17" {
		t.Fatalf("fetched offset %d (%q), want 17", m.Offset, m.Value)
	}
}
