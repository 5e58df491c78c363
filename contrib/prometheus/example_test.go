package azprom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	azprom "github.com/azkafka/azkafka/contrib/prometheus"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/sdk"
)

func ExampleNew() {
	cluster, err := embedded.Start(embedded.Topic("events", 3))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	// One Collector per process: register it, hand it to every client.
	c := azprom.New()
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(c), served by promhttp.Handler()
	reg.MustRegister(c)
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(cluster.Addrs()...), Topic: "events", RequiredAcks: kafka.RequireAll},
		sdk.WithAZ("az-a"), sdk.WithClientID("billing"), sdk.WithMetrics(c))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("v1")}, kafka.Message{Value: []byte("v2")}); err != nil {
		fmt.Println(err)
	}
	w.Close()
	n, err := testutil.GatherAndCount(reg, "azkafka_writer_messages_total")
	fmt.Println("series of azkafka_writer_messages_total:", n, err)
	// Output: series of azkafka_writer_messages_total: 1 <nil>
}
