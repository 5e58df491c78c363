package kframe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASLAuthenticate runs SaslHandshake v1 and SaslAuthenticate v1 with
// mech on conn, a connection to addr, as kafka-go does (the mechanism
// gets addr's host and port through sasl.WithMetadata, which AWS MSK IAM
// signs). It returns the session's lifetime the broker gave (0: none):
// the broker closes the connection once it is over.
func SASLAuthenticate(ctx context.Context, conn net.Conn, mech sasl.Mechanism, clientID, addr string) (time.Duration, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	port, _ := strconv.Atoi(p)
	ctx = sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: port})
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	corr := int32(100)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	resp, err := Request(conn, clientID, corr, hs)
	if err != nil {
		return 0, fmt.Errorf("SASL handshake with %s: %w", addr, err)
	}
	if r := resp.(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		return 0, fmt.Errorf("SASL handshake with %s: mechanism %s refused (%s; the broker offers %s)", addr, mech.Name(), ErrorName(r.ErrorCode), strings.Join(r.SupportedMechanisms, ", "))
	}
	sess, msg, err := mech.Start(ctx)
	if err != nil {
		return 0, fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	var lifetime time.Duration
	for done := false; !done; {
		corr++
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 1, msg
		resp, err := Request(conn, clientID, corr, auth)
		if err != nil {
			return 0, fmt.Errorf("SASL authenticate with %s: %w", addr, err)
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != 0 {
			emsg := ""
			if r.ErrorMessage != nil {
				emsg = ": " + *r.ErrorMessage
			}
			return 0, fmt.Errorf("SASL authenticate with %s: %s%s", addr, ErrorName(r.ErrorCode), emsg)
		}
		lifetime = time.Duration(r.SessionLifetimeMillis) * time.Millisecond
		done, msg, err = sess.Next(ctx, r.SASLAuthBytes)
		if err != nil {
			return 0, fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
	}
	return lifetime, nil
}

// ErrorName names a Kafka error code, e.g. "GROUP_AUTHORIZATION_FAILED";
// "error code N" for a code kerr does not know.
func ErrorName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil && e.Code == code {
		return e.Message
	}
	return fmt.Sprintf("error code %d", code)
}
