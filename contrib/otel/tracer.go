package azotel

import (
	"context"
	"errors"
	"strconv"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracer traces produce and consume for any kafka-go shaped client
// (sdk.Writer and sdk.Reader, or kafka-go's own), following the messaging
// semantic conventions: a producer span "send <topic>" per WriteMessages
// call, whose context every message of the call carries in its headers
// (W3C trace context: traceparent, tracestate), and a consumer span
// "process <topic>" per message processed, the child of the span that
// sent it. Create it with NewTracer; safe for concurrent use.
//
//	t := azotel.NewTracer()
//	w := t.Writer(sdkWriter, "orders")
//	err := w.WriteMessages(ctx, msgs...)
//	...
//	m, err := r.FetchMessage(ctx)
//	err = t.Process(ctx, m, func(ctx context.Context) error { return handle(ctx, m) })
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	group  string
	keys   bool
}

// TracerOption configures a Tracer.
type TracerOption func(*Tracer)

// WithTracerProvider sets the TracerProvider. Default:
// otel.GetTracerProvider().
func WithTracerProvider(p trace.TracerProvider) TracerOption {
	return func(t *Tracer) { t.tracer = p.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)) }
}

// WithPropagator sets how span contexts travel in headers. Default: W3C
// trace context (propagation.TraceContext).
func WithPropagator(p propagation.TextMapPropagator) TracerOption {
	return func(t *Tracer) { t.prop = p }
}

// WithConsumerGroup sets messaging.consumer.group.name on process spans.
// Default: none.
func WithConsumerGroup(group string) TracerOption { return func(t *Tracer) { t.group = group } }

// WithMessageKeys records each processed message's key as
// messaging.kafka.message.key (keys may be personal data, or binary).
// Default: off.
func WithMessageKeys() TracerOption { return func(t *Tracer) { t.keys = true } }

// NewTracer returns a Tracer.
func NewTracer(opts ...TracerOption) *Tracer {
	t := &Tracer{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(t)
	}
	if t.tracer == nil {
		WithTracerProvider(otel.GetTracerProvider())(t)
	}
	return t
}

// MessageWriter is what Writer wraps: sdk.Writer, kafka.Writer.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Writer returns w with tracing: each WriteMessages starts a producer span
// (for an async Writer it ends when the messages are queued) and hands w
// copies of the messages whose headers carry the span's context (a header
// of the same name is replaced; the caller's messages are not modified).
// topic is w's topic; "" when the messages name theirs (the span then
// names the first message's).
func (t *Tracer) Writer(w MessageWriter, topic string) MessageWriter {
	return &tracingWriter{t: t, w: w, topic: topic}
}

type tracingWriter struct {
	t     *Tracer
	w     MessageWriter
	topic string
}

func (tw *tracingWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	topic := tw.topic
	if topic == "" && len(msgs) > 0 {
		topic = msgs[0].Topic
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationName("send"),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(topic),
	}
	if len(msgs) != 1 {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(len(msgs)))
	}
	ctx, span := tw.t.tracer.Start(ctx, "send "+topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	defer span.End()
	out := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		out[i].Headers = append([]kafka.Header(nil), m.Headers...)
		tw.t.prop.Inject(ctx, headerCarrier{&out[i]})
	}
	err := tw.w.WriteMessages(ctx, out...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	}
	return err
}

// errorType is error.type for a write's error: kafka-go's error type when
// it is one, else "_OTHER".
func errorType(err error) string {
	var werrs kafka.WriteErrors
	var tooLarge kafka.MessageTooLargeError
	switch {
	case errors.As(err, &werrs):
		return "kafka.WriteErrors"
	case errors.As(err, &tooLarge):
		return "kafka.MessageTooLargeError"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// Process runs fn for m inside a consumer span "process <topic>", the child
// of the span whose context m's headers carry (the send span), linked to
// ctx's span when there is both; without one in the headers, the child of
// ctx's. The span ends when fn returns, with fn's error as its status.
func (t *Tracer) Process(ctx context.Context, m kafka.Message, fn func(context.Context) error) error {
	parent := t.Extract(ctx, m)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(t.processAttrs(m)...)}
	if local := trace.SpanContextFromContext(ctx); local.IsValid() && !local.Equal(trace.SpanContextFromContext(parent)) {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: local}))
	}
	pctx, span := t.tracer.Start(parent, "process "+m.Topic, opts...)
	defer span.End()
	err := fn(pctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeOther)
	}
	return err
}

func (t *Tracer) processAttrs(m kafka.Message) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(m.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(m.Partition)),
		semconv.MessagingKafkaOffset(int(m.Offset)),
		semconv.MessagingMessageBodySize(len(m.Value)),
	}
	if t.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(t.group))
	}
	if t.keys && m.Key != nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(m.Key)))
	}
	if m.Key != nil && m.Value == nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageTombstone(true))
	}
	return attrs
}

// Inject writes ctx's span context into m's headers, replacing headers of
// the same names.
func (t *Tracer) Inject(ctx context.Context, m *kafka.Message) {
	t.prop.Inject(ctx, headerCarrier{m})
}

// Extract returns ctx with the span context m's headers carry, if any.
func (t *Tracer) Extract(ctx context.Context, m kafka.Message) context.Context {
	return t.prop.Extract(ctx, headerCarrier{&m})
}

// headerCarrier is a message's headers as a propagation.TextMapCarrier.
type headerCarrier struct{ m *kafka.Message }

func (c headerCarrier) Get(key string) string {
	for _, h := range c.m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	for i, h := range c.m.Headers {
		if h.Key == key {
			c.m.Headers[i].Value = []byte(value)
			return
		}
	}
	c.m.Headers = append(c.m.Headers, kafka.Header{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c.m.Headers))
	for i, h := range c.m.Headers {
		keys[i] = h.Key
	}
	return keys
}
