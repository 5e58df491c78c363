package azotel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	azotel "github.com/azkafka/azkafka/contrib/otel"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

func newTracer(t *testing.T, opts ...azotel.TracerOption) (*azotel.Tracer, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return azotel.NewTracer(append([]azotel.TracerOption{azotel.WithTracerProvider(tp)}, opts...)...), sr, tp.Tracer("test")
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestTraceProduceAndConsume: a traced sdk.Writer's call is a producer
// span under the caller's, its messages carry the span's context in a
// traceparent header (replacing a stale one, leaving the caller's messages
// alone), and processing each message read back by an sdk.Reader is a
// consumer span, the send span's child, linked to the consumer's own span.
func TestTraceProduceAndConsume(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("traced", 1))
	tracer, sr, test := newTracer(t, azotel.WithConsumerGroup("g"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := []sdk.Option{sdk.WithAZ("az-a"), sdk.WithGetenv(func(string) string { return "" })}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.Addrs()...), Topic: "traced", RequiredAcks: kafka.RequireAll}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	msgs := []kafka.Message{
		{Key: []byte("a"), Value: []byte("1"), Headers: []kafka.Header{{Key: "traceparent", Value: []byte("stale")}, {Key: "h", Value: []byte("v")}}},
		{Key: []byte("b"), Value: []byte("2")},
	}
	reqCtx, request := test.Start(ctx, "request")
	if err := tracer.Writer(w, "traced").WriteMessages(reqCtx, msgs...); err != nil {
		t.Fatal(err)
	}
	request.End()
	if v, _ := header(msgs[0], "traceparent"); v != "stale" || len(msgs[0].Headers) != 2 || msgs[1].Headers != nil {
		t.Errorf("the caller's messages were modified: %+v", msgs)
	}

	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: c.Addrs(), Topic: "traced", MaxWait: 100 * time.Millisecond}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	loopCtx, loop := test.Start(ctx, "poll loop")
	errHandler := errors.New("handler failed")
	for i := range msgs {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := header(m, "h"); i == 0 && (!ok || v != "v") {
			t.Errorf("message %d lost its header h: %+v", i, m.Headers)
		}
		err = tracer.Process(loopCtx, m, func(ctx context.Context) error {
			if !trace.SpanFromContext(ctx).IsRecording() {
				t.Error("fn's ctx carries no recording span")
			}
			if i == 1 {
				return errHandler
			}
			return nil
		})
		if (i == 1) != errors.Is(err, errHandler) {
			t.Errorf("Process %d = %v", i, err)
		}
	}
	loop.End()

	var send sdktrace.ReadOnlySpan
	var process []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "send traced":
			send = s
		case "process traced":
			process = append(process, s)
		}
	}
	if send == nil || len(process) != 2 {
		t.Fatalf("spans %v, want one send and two process spans", sr.Ended())
	}
	sa := attrs(send)
	if send.SpanKind() != trace.SpanKindProducer || send.Parent().SpanID() != request.SpanContext().SpanID() ||
		sa["messaging.system"].AsString() != "kafka" || sa["messaging.operation.name"].AsString() != "send" ||
		sa["messaging.operation.type"].AsString() != "send" || sa["messaging.destination.name"].AsString() != "traced" ||
		sa["messaging.batch.message_count"].AsInt64() != 2 {
		t.Errorf("send span: kind %v, parent %v (request %v), attributes %v", send.SpanKind(), send.Parent().SpanID(), request.SpanContext().SpanID(), send.Attributes())
	}
	for i, p := range process {
		pa := attrs(p)
		if p.SpanKind() != trace.SpanKindConsumer || p.Parent().SpanID() != send.SpanContext().SpanID() || p.SpanContext().TraceID() != send.SpanContext().TraceID() {
			t.Errorf("process span %d: kind %v, parent %v, want the send span %v's child", i, p.SpanKind(), p.Parent(), send.SpanContext())
		}
		if !slices.ContainsFunc(p.Links(), func(l sdktrace.Link) bool { return l.SpanContext.SpanID() == loop.SpanContext().SpanID() }) {
			t.Errorf("process span %d is not linked to the consumer's span: %v", i, p.Links())
		}
		if pa["messaging.operation.type"].AsString() != "process" || pa["messaging.consumer.group.name"].AsString() != "g" ||
			pa["messaging.destination.partition.id"].AsString() != "0" || pa["messaging.kafka.offset"].AsInt64() != int64(i) {
			t.Errorf("process span %d attributes %v", i, p.Attributes())
		}
		if _, ok := pa["messaging.kafka.message.key"]; ok {
			t.Errorf("process span %d records the key without WithMessageKeys", i)
		}
		if wantErr := i == 1; (p.Status().Code == codes.Error) != wantErr {
			t.Errorf("process span %d status %v", i, p.Status())
		}
	}
}

// TestInjectExtract: Inject writes the W3C traceparent header, replacing
// one already there, and Extract reads it back.
func TestInjectExtract(t *testing.T) {
	tracer, _, test := newTracer(t, azotel.WithMessageKeys())
	ctx, span := test.Start(context.Background(), "s")
	defer span.End()
	m := kafka.Message{Headers: []kafka.Header{{Key: "traceparent", Value: []byte("00-old")}}}
	tracer.Inject(ctx, &m)
	if len(m.Headers) != 1 {
		t.Fatalf("headers %v, want the traceparent replaced", m.Headers)
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if v, _ := header(m, "traceparent"); v != want {
		t.Errorf("traceparent %q, want %q", v, want)
	}
	got := trace.SpanContextFromContext(tracer.Extract(context.Background(), m))
	if !got.Equal(span.SpanContext().WithRemote(true)) {
		t.Errorf("extracted %v, want %v", got, span.SpanContext())
	}
	if none := trace.SpanContextFromContext(tracer.Extract(context.Background(), kafka.Message{})); none.IsValid() {
		t.Errorf("extracted %v from a message without headers", none)
	}
}
