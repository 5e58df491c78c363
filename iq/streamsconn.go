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
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/azkafka/azkafka/internal/frameguard"
)

// kafka-go's protocol layer knows API keys up to 51, so StreamsGroupDescribe
// (89) is sent on a connection of our own: dialled, TLS-wrapped and SASL-
// authenticated with the settings of the source's kafka.Transport, one
// request per poll. This keeps the module free of a second Kafka client.

// describeStreamsGroup finds the group's coordinator and asks it.
func (k *kafkaGoCluster) describeStreamsGroup(ctx context.Context, group string) (*StreamsGroup, error) {
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
	body, err := roundTrip(conn, appendStreamsGroupDescribeRequest(nil, 1, k.clientID(), group), 1, true)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// Brokers close the connection on an API key they do not know.
			return nil, fmt.Errorf("StreamsGroupDescribe to %s: connection closed: the broker does not support the streams rebalance protocol (Apache Kafka 4.1 or later): %w", addr, err)
		}
		return nil, fmt.Errorf("StreamsGroupDescribe to %s: %w", addr, err)
	}
	groups, err := DecodeStreamsGroupDescribe(body)
	if err != nil {
		return nil, fmt.Errorf("StreamsGroupDescribe response from %s: %w", addr, err)
	}
	for i := range groups {
		if groups[i].GroupID == group {
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
	req := appendRequestHeaderV1(nil, 17, 1, corr, clientID)
	req = binary.BigEndian.AppendUint16(req, uint16(len(mech.Name())))
	req = append(req, mech.Name()...)
	body, err := roundTrip(conn, finishFrame(req), corr, false)
	if err != nil {
		return fmt.Errorf("SASL handshake with %s: %w", addr, err)
	}
	r := &wireReader{b: body}
	if code := r.int16("errorCode"); r.err == nil && code != 0 {
		return fmt.Errorf("SASL handshake with %s: mechanism %s refused (error code %d)", addr, mech.Name(), code)
	}
	sess, msg, err := mech.Start(ctx)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	for done := false; !done; {
		corr++
		req := appendRequestHeaderV1(nil, 36, 1, corr, clientID)
		req = binary.BigEndian.AppendUint32(req, uint32(len(msg)))
		req = append(req, msg...)
		body, err := roundTrip(conn, finishFrame(req), corr, false)
		if err != nil {
			return fmt.Errorf("SASL authenticate with %s: %w", addr, err)
		}
		r := &wireReader{b: body}
		code := r.int16("errorCode")
		emsg, _ := r.string16("errorMessage", true)
		challenge, _ := r.bytes32("authBytes", true)
		if r.err != nil {
			return fmt.Errorf("SASL authenticate response from %s: %w", addr, r.err)
		}
		if code != 0 {
			return fmt.Errorf("SASL authenticate with %s: error code %d: %s", addr, code, emsg)
		}
		done, msg, err = sess.Next(ctx, challenge)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
	}
	return nil
}

func appendRequestHeaderV1(dst []byte, key, version int16, corr int32, clientID string) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	return append(dst, clientID...)
}

func finishFrame(b []byte) []byte {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// maxResponseBytes bounds a response read on our own connection: 64 MiB.
const maxResponseBytes = 64 << 20

// roundTrip writes a framed request and reads one response, returning its
// body after the response header (v1, with tagged fields, when flexible).
func roundTrip(conn net.Conn, req []byte, corr int32, flexible bool) ([]byte, error) {
	if _, err := conn.Write(req); err != nil {
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
	r := &wireReader{b: b}
	if got := r.int32("correlationId"); got != corr {
		return nil, fmt.Errorf("response correlation ID %d, want %d", got, corr)
	}
	if flexible {
		r.taggedFields("responseHeader")
	}
	if r.err != nil {
		return nil, r.err
	}
	return b[r.off:], nil
}
