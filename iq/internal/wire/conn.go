package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
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
		if err := saslAuthenticate(ctx, conn, t.SASL, clientID, addr); err != nil {
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

// saslAuthenticate runs SaslHandshake v1 and SaslAuthenticate v1.
func saslAuthenticate(ctx context.Context, conn net.Conn, mech sasl.Mechanism, clientID, addr string) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	corr := int32(100)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	resp, err := kframe.Request(conn, clientID, corr, hs)
	if err != nil {
		return fmt.Errorf("SASL handshake with %s: %w", addr, err)
	}
	if r := resp.(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		return fmt.Errorf("SASL handshake with %s: mechanism %s refused (%s; the broker offers %s)", addr, mech.Name(), ErrorName(r.ErrorCode), strings.Join(r.SupportedMechanisms, ", "))
	}
	sess, msg, err := mech.Start(ctx)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	for done := false; !done; {
		corr++
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 1, msg
		resp, err := kframe.Request(conn, clientID, corr, auth)
		if err != nil {
			return fmt.Errorf("SASL authenticate with %s: %w", addr, err)
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			emsg := ""
			if r.ErrorMessage != nil {
				emsg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("SASL authenticate with %s: %s%s", addr, ErrorName(r.ErrorCode), emsg)
		}
		done, msg, err = sess.Next(ctx, r.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
	}
	return nil
}

// ErrorName names a Kafka error code, e.g. "GROUP_AUTHORIZATION_FAILED";
// "error code N" for a code kerr does not know.
func ErrorName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil && e.Code == code {
		return e.Message
	}
	return fmt.Sprintf("error code %d", code)
}
