package dialer

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/internal/testkit/embedded"
)

func TestPartitions(t *testing.T) {
	c := embedded.StartT(t, embedded.Topic("stock", 3))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n, err := Partitions(ctx, c.Addrs()[0], "stock"); err != nil || n != 3 {
		t.Fatalf("Partitions = %d, %v", n, err)
	}
	Client.Addr = kafka.TCP(c.Addrs()...)
	md, err := Client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"stock"}})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("Metadata: %v", err)
	}
}
