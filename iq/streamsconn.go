package iq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/iq/internal/wire"
)

// describeStreamsGroup finds the group's coordinator with kafka-go and
// asks it on a connection of the source's own (see package wire: kafka-go
// does not know StreamsGroupDescribe).
func (k *kafkaGoCluster) describeStreamsGroup(ctx context.Context, group string) (*kmsg.StreamsGroupDescribeResponseGroup, error) {
	fc, err := k.client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err != nil {
		return nil, fmt.Errorf("FindCoordinator: %w", err)
	}
	if fc.Error != nil {
		return nil, fmt.Errorf("FindCoordinator: %w", fc.Error)
	}
	if fc.Coordinator == nil {
		return nil, errors.New("FindCoordinator: no coordinator")
	}
	addr := net.JoinHostPort(fc.Coordinator.Host, strconv.Itoa(fc.Coordinator.Port))
	conn, err := wire.Dial(ctx, k.transport(), addr, k.clientID(), k.maxResponse)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return wire.DescribeStreamsGroup(conn, addr, k.clientID(), group)
}

// transport returns the source's kafka.Transport, nil for another
// RoundTripper: the own connection is then plain TCP.
func (k *kafkaGoCluster) transport() *kafka.Transport {
	t, _ := k.client.Transport.(*kafka.Transport)
	return t
}

func (k *kafkaGoCluster) clientID() string {
	if t := k.transport(); t != nil && t.ClientID != "" {
		return t.ClientID
	}
	return "azkafka-iq"
}
