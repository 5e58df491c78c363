// Command exactlyonce is consume-transform-produce exactly once with
// kafka-go's types: an sdk.Processor reads the group's "orders", writes
// one "invoices" message per order, and commits both with the group's
// offsets in one transaction; an sdk.TxnWriter first writes the orders in
// transactions, one of them aborted. A read_committed reader then counts
// what each topic holds.
//
//	KAFKA_BROKERS=localhost:9092 go run ./examples/exactlyonce  # a Kafka cluster (make broker)
//	go run ./examples/exactlyonce                               # the embedded broker: the TxnWriter part
//
// The embedded broker stops answering under a transactional consumer
// group, so there the Processor part is left out (and says so).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/sdk"
)

func main() {
	brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, brokers, os.Getenv(embeddedVar) == ""); err != nil {
		log.Fatal(err)
	}
}

const orders = 100

func run(ctx context.Context, brokers []string, withProcessor bool) error {
	suffix := fmt.Sprint(time.Now().UnixNano())
	in, out, group := "orders-"+suffix, "invoices-"+suffix, "billing-"+suffix
	for _, topic := range []string{in, out} {
		if err := createTopic(brokers, topic, 3); err != nil {
			return err
		}
	}

	// Transactions of a producer: the orders in two committed, one
	// aborted between them.
	w, err := sdk.NewTxnWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: in, Balancer: &kafka.Hash{}},
		sdk.WithTransactionalID("orders-"+suffix))
	if err != nil {
		return err
	}
	defer w.Close()
	for i, commit := range []bool{true, false, true} {
		if err := w.Begin(); err != nil {
			return err
		}
		for j := range orders / 2 {
			n := i*orders/2 + j
			if !commit {
				n = -1 - j // never visible
			}
			if err := w.WriteMessages(ctx, kafka.Message{Key: fmt.Appendf(nil, "customer-%d", n%7), Value: fmt.Appendf(nil, "order %d", n)}); err != nil {
				return errors.Join(err, w.Abort(ctx))
			}
		}
		end := w.Abort
		if commit {
			end = w.Commit
		}
		if err := end(ctx); err != nil {
			return err
		}
	}
	st := w.Stats()
	fmt.Printf("TxnWriter: %d transactions, %d committed, aborted %v\n", st.Begun, st.Committed, st.Aborted)
	read, err := readCommitted(ctx, brokers, in, orders)
	if err != nil {
		return err
	}
	for _, m := range read {
		if strings.HasPrefix(string(m.Value), "order -") {
			return fmt.Errorf("read_committed read %q of the aborted transaction", m.Value)
		}
	}
	fmt.Printf("read_committed: %d orders, none of the aborted transaction\n", len(read))
	if !withProcessor {
		fmt.Println("the Processor needs a Kafka cluster: set KAFKA_BROKERS (make broker)")
		return nil
	}

	// Consume-transform-produce: one invoice per order, committed with
	// the group's offsets.
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	p, err := sdk.NewProcessor(kafka.ReaderConfig{Brokers: brokers, GroupID: group, Topic: in},
		&kafka.Writer{Topic: out, Balancer: &kafka.Hash{}}, sdk.WithTransactionalID(group+"-0"))
	if err != nil {
		return err
	}
	defer p.Close()
	go func() {
		done <- p.Run(pctx, func(ctx context.Context, in []kafka.Message, out sdk.MessageWriter) error {
			return out.WriteMessages(ctx, invoicesFor(in)...) // committed with in's offsets, or neither
		})
	}()
	invoices, err := readCommitted(ctx, brokers, out, orders)
	stop()
	if err != nil {
		return err
	}
	fmt.Printf("read_committed: %d invoices, e.g. %q\n", len(invoices), invoices[0].Value)
	if err := <-done; err != nil {
		return err
	}
	pst := p.Stats()
	fmt.Printf("Processor: %d transactions committed\n", pst.Committed)
	return nil
}

// invoicesFor is one invoice per order, keyed as the order.
func invoicesFor(orders []kafka.Message) []kafka.Message {
	invoices := make([]kafka.Message, len(orders))
	for i, m := range orders {
		invoices[i] = kafka.Message{Key: m.Key, Value: append([]byte("invoice for "), m.Value...)}
	}
	return invoices
}

// readCommitted reads n messages of topic as a read_committed reader of
// a group of its own: what committed transactions wrote, never what an
// aborted one did.
func readCommitted(ctx context.Context, brokers []string, topic string, n int) ([]kafka.Message, error) {
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, GroupID: topic + "-reader",
		IsolationLevel: kafka.ReadCommitted, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	msgs := make([]kafka.Message, 0, n)
	for len(msgs) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// createTopic creates topic with parts partitions.
func createTopic(brokers []string, topic string, parts int) error {
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		return err
	}
	defer conn.Close()
	controller, err := conn.Controller()
	if err != nil {
		return err
	}
	cc, err := kafka.Dial("tcp", fmt.Sprintf("%s:%d", controller.Host, controller.Port))
	if err != nil {
		return err
	}
	defer cc.Close()
	return cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: parts, ReplicationFactor: 1})
}
