// Package dialer keeps kafka-go clients that need their Dialer and
// Transport: a kafka.Conn and a kafka.Client.
package dialer

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
)

// Partitions lists topic's partitions through a Dialer.
func Partitions(ctx context.Context, broker, topic string) (int, error) {
	d := &kafka.Dialer{Timeout: 5 * time.Second, ClientID: "inventory"}
	conn, err := d.DialContext(ctx, "tcp", broker)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ps, err := conn.ReadPartitions(topic)
	return len(ps), err
}

// Client is a kafka.Client on its own Transport.
var Client = &kafka.Client{Transport: &kafka.Transport{ClientID: "inventory"}}
