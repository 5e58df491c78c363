package sdk_test

// The errors a Reader returns name their cause: the address it could not
// reach and why, or the refusal that no retry can fix.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/sdk"
)

// deadAddress returns a loopback address where nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestReaderErrorNamesUnreachableBroker: a Reader whose only broker
// refuses connections returns, when the caller's ctx ends, the ctx's
// error naming the broker's address and "connection refused": on the
// first call and on the next one, as a program that polls with a timeout
// per call sees it. The group Reader dials from NewReader on, so its first
// call starts after that dial failed.
func TestReaderErrorNamesUnreachableBroker(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(map[bool]string{false: "partition", true: "group"}[group], func(t *testing.T) {
			t.Parallel()
			addr := deadAddress(t)
			cfg := kafka.ReaderConfig{Brokers: []string{addr}, Topic: "events", MaxWait: 50 * time.Millisecond}
			if group {
				cfg.GroupID = "g"
			}
			r, err := sdk.NewReader(cfg, testOptions(t)...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if group {
				waitFor(testCtx(t), t, "the group's first dial to fail", func() (bool, string) {
					n := r.Stats().SDK.Conn.DialFailures
					return n > 0, fmt.Sprint(n, " dial failures")
				})
			}
			for call := 1; call <= 2; call++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err = r.FetchMessage(ctx)
				cancel()
				t.Logf("FetchMessage call %d: %v", call, err)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("call %d: errors.Is(err, context.DeadlineExceeded) is false", call)
				}
				if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
					t.Errorf("call %d: the error does not name %s and connection refused: %v", call, addr, err)
				}
			}
		})
	}
}

// failPlainPasswords makes k answer a SASL PLAIN authentication whose
// password is not pw as Kafka does, with SASL_AUTHENTICATION_FAILED (kfake
// itself closes the connection).
func failPlainPasswords(k *kfake.Cluster, pw string) {
	k.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		parts := bytes.Split(r.SASLAuthBytes, []byte{0})
		if len(parts) == 3 && string(parts[2]) == pw {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = 58 // SASL_AUTHENTICATION_FAILED
		msg := "Authentication failed: Invalid username or password"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

// TestReaderWrongSASLPassword: a wrong password is a refusal. When the
// broker answers SASL_AUTHENTICATION_FAILED, as Kafka does, FetchMessage
// returns it well before the ctx's deadline, matching
// kafka.SASLAuthenticationFailed and carrying the broker's message, in
// both modes. kfake itself closes the connection instead, which a client
// cannot tell from a network fault (Java's retries it too): the Reader
// waits it out and the ctx's error names the cause.
func TestReaderWrongSASLPassword(t *testing.T) {
	t.Parallel()
	for _, answers := range []bool{true, false} {
		for _, group := range []bool{false, true} {
			name := map[bool]string{true: "broker answers", false: "broker closes"}[answers] +
				map[bool]string{false: "/partition", true: "/group"}[group]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"), kfake.EnableSASL(),
					kfake.Superuser("PLAIN", "admin", "admin-pw"))
				if err != nil {
					t.Fatal(err)
				}
				defer k.Close()
				if answers {
					failPlainPasswords(k, "admin-pw")
				}
				cfg := kafka.ReaderConfig{
					Brokers: k.ListenAddrs(),
					Topic:   "events",
					MaxWait: 50 * time.Millisecond,
					Dialer:  &kafka.Dialer{Timeout: 5 * time.Second, SASLMechanism: plain.Mechanism{Username: "admin", Password: "wrong"}},
				}
				if group {
					cfg.GroupID = "g"
				}
				r, err := sdk.NewReader(cfg, testOptions(t, refusalBudget())...)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				wait := 20 * time.Second
				if !answers {
					wait = time.Second
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				_, err = r.FetchMessage(ctx)
				t.Logf("FetchMessage: %v", err)
				if err == nil {
					t.Fatal("FetchMessage with a wrong password succeeded")
				}
				if !answers {
					if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "EOF") {
						t.Errorf("want the ctx's error naming the closed connection (EOF): %v", err)
					}
					return
				}
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("the refusal was retried until the ctx's deadline (%v): %v", wait, err)
				}
				if !errors.Is(err, kafka.SASLAuthenticationFailed) {
					t.Errorf("errors.Is(err, kafka.SASLAuthenticationFailed) is false: %v", err)
				}
				if !strings.Contains(err.Error(), "Invalid username or password") {
					t.Errorf("the error does not carry the broker's message: %v", err)
				}
				if r.Stats().SDK.Retries != 0 {
					t.Errorf("the refusal was retried")
				}
			})
		}
	}
}
