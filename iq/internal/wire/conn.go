package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/internal/kframe"
)

// kafka-go's protocol layer knows API keys up to 51, so the cluster source
// sends StreamsGroupDescribe (89) on a connection of its own: dialled,
// TLS-wrapped and SASL-authenticated with the settings of its
// kafka.Transport. The requests and responses on it (SaslHandshake,
// SaslAuthenticate, StreamsGroupDescribe) are encoded and decoded by
// franz-go's kmsg, whose decoders bound every length; only the framing is
// written here.

// Dial connects to addr as t would: with its Dial, TLS and SASL settings
// (t nil: plain TCP with a 5s dial timeout). The connection reads through
// the frame guard with limit maxResponse (0: its default), as the SDK's
// connections do; clientID is sent in the SASL requests. ctx bounds the
// dial and the handshakes.
func Dial(ctx context.Context, t *kafka.Transport, addr, clientID string, maxResponse int) (net.Conn, error) {
	var conn net.Conn
	var err error
	if t != nil && t.Dial != nil {
		conn, err = t.Dial(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if t != nil && t.TLS != nil {
		cfg := t.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	conn = frameguard.Wrap(conn, addr, maxResponse, nil) // as is when the Transport's Dial guards it
	if t != nil && t.SASL != nil {
		if _, err := kframe.SASLAuthenticate(ctx, conn, t.SASL, clientID, addr); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// DescribeStreamsGroup sends StreamsGroupDescribe v0 for group on conn, a
// connection to the group's coordinator at addr, and returns the group of
// the response. A broker that closes the connection instead (it does not
// know the request) is an error that says so.
func DescribeStreamsGroup(conn net.Conn, addr, clientID, group string) (*kmsg.StreamsGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Version = 0
	req.Groups = []string{group}
	resp, err := kframe.Request(conn, clientID, 1, req)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// Brokers close the connection on an API key they do not know.
			return nil, fmt.Errorf("StreamsGroupDescribe to %s: connection closed: the broker does not support the streams rebalance protocol (Apache Kafka 4.1 or later): %w", addr, err)
		}
		return nil, fmt.Errorf("StreamsGroupDescribe to %s: %w", addr, err)
	}
	groups := resp.(*kmsg.StreamsGroupDescribeResponse).Groups
	for i := range groups {
		if groups[i].Group == group {
			return &groups[i], nil
		}
	}
	return nil, fmt.Errorf("StreamsGroupDescribe response from %s does not list group %s", addr, Quote(group))
}
