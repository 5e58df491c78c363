package iq

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/internal/kframe"
)

// kafka-go's protocol layer knows API keys up to 51, so StreamsGroupDescribe
// (89) is sent on a connection of our own: dialled, TLS-wrapped and SASL-
// authenticated with the settings of the source's kafka.Transport, one
// request per poll. Its requests and responses (SaslHandshake,
// SaslAuthenticate, StreamsGroupDescribe) are encoded and decoded by
// franz-go's kmsg, whose decoders bound every length; only the framing is
// ours.

// describeStreamsGroup finds the group's coordinator and asks it.
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
	conn, err := k.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Version = 0
	req.Groups = []string{group}
	resp, err := request(conn, k.clientID(), 1, req)
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
	return nil, fmt.Errorf("StreamsGroupDescribe response from %s does not list group %s", addr, quote(group))
}

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

// dial connects to addr as the source's kafka.Transport would: its Dial,
// TLS and SASL settings; a plain TCP connection for other RoundTrippers.
func (k *kafkaGoCluster) dial(ctx context.Context, addr string) (net.Conn, error) {
	t := k.transport()
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
	conn = frameguard.Wrap(conn, addr, k.maxResponse, nil) // as is when the Transport's Dial guards it
	if t != nil && t.SASL != nil {
		if err := saslAuthenticate(ctx, conn, t.SASL, k.clientID(), addr); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// saslAuthenticate runs SaslHandshake v1 and SaslAuthenticate v1.
func saslAuthenticate(ctx context.Context, conn net.Conn, mech sasl.Mechanism, clientID, addr string) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	corr := int32(100)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	resp, err := request(conn, clientID, corr, hs)
	if err != nil {
		return fmt.Errorf("SASL handshake with %s: %w", addr, err)
	}
	if r := resp.(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		return fmt.Errorf("SASL handshake with %s: mechanism %s refused (%s; the broker offers %s)", addr, mech.Name(), errorName(r.ErrorCode), strings.Join(r.SupportedMechanisms, ", "))
	}
	sess, msg, err := mech.Start(ctx)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	for done := false; !done; {
		corr++
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 1, msg
		resp, err := request(conn, clientID, corr, auth)
		if err != nil {
			return fmt.Errorf("SASL authenticate with %s: %w", addr, err)
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			emsg := ""
			if r.ErrorMessage != nil {
				emsg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("SASL authenticate with %s: %s%s", addr, errorName(r.ErrorCode), emsg)
		}
		done, msg, err = sess.Next(ctx, r.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
	}
	return nil
}

// errorName names a Kafka error code: "GROUP_AUTHORIZATION_FAILED".
func errorName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil && e.Code == code {
		return e.Message
	}
	return fmt.Sprintf("error code %d", code)
}

// maxResponseBytes bounds a response read on our own connection: 64 MiB.
const maxResponseBytes = 64 << 20

// request writes req, framed by kmsg with clientID and correlation ID corr,
// reads one response and decodes it with kmsg. An I/O error is returned as
// it is; a response that does not decode is an error that says so.
func request(conn net.Conn, clientID string, corr int32, req kmsg.Request) (kmsg.Response, error) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, corr)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxResponseBytes {
		return nil, fmt.Errorf("response size %d out of range 4..%d", n, maxResponseBytes)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(conn, b); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, fmt.Errorf("response correlation ID %d, want %d", got, corr)
	}
	off := 4
	if kframe.ResponseHeaderFlexible(req.Key(), req.GetVersion()) {
		var err error
		if off, err = kframe.SkipTags(b, off); err != nil {
			return nil, fmt.Errorf("response header: %w", err)
		}
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(b[off:]); err != nil {
		return nil, fmt.Errorf("decoding the %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
