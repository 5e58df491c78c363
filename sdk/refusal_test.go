package sdk_test

// Refusals on the embedded broker: a certificate the client cannot trust
// and an authorizer that refuses a producer ID come back as clear errors at
// once, never retried as transient closes. (The embedded broker closes the
// connection on a failed SASL exchange instead of answering
// SASL_AUTHENTICATION_FAILED, as Kafka does; a wrong password is covered
// by the conformance suite, TestSDKSASLSSL, on Kafka 4.3.1.)

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// refusalBudget is a retry budget of about a minute: a refusal retried as
// transient would use it up (and show in Stats), a refusal returned at
// once does not.
func refusalBudget() sdk.Option {
	return sdk.WithRetry(1000, 10*time.Millisecond, 100*time.Millisecond)
}

// requireRefusal checks that err is the refusal: not the ctx's, naming
// every one of want, not transient, and that nothing was retried.
func requireRefusal(t *testing.T, what string, err error, retries int64, want ...string) {
	t.Helper()
	t.Logf("%s: %v (%d retries)", what, err, retries)
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("%s: the refusal was retried until ctx ended: %v", what, err)
	}
	text := strings.ToLower(err.Error())
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s: the error does not say %q: %v", what, w, err)
		}
	}
	if retry.IsTransient(err) {
		t.Fatalf("%s: retry.IsTransient is true for %v", what, err)
	}
	if retries != 0 {
		t.Fatalf("%s: %d retries of a refusal", what, retries)
	}
}

// TestUntrustedCertificateIsNotRetried: a broker certificate from a CA the
// client does not trust, or one that has expired, fails the Writer (both
// paths) and a Reader in a group with the certificate error.
func TestUntrustedCertificateIsNotRetried(t *testing.T) {
	_, otherCA := tlsConfigPair(t)
	good, _ := tlsConfigPair(t)
	expired, trustsExpired := tlsConfigPairValid(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	for _, tc := range []struct {
		name      string
		server    *tls.Config
		client    *tls.Config
		wantWords []string
	}{
		{"CA does not match", good, otherCA, []string{"certificate", "unknown authority"}},
		{"expired certificate", expired, trustsExpired, []string{"certificate", "expired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"), kfake.TLS(tc.server))
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			addr := k.ListenAddrs()[0]
			for _, idem := range []bool{true, false} {
				tr, err := sdk.NewTransport(&kafka.Transport{TLS: tc.client}, hermetic("az-a")...)
				if err != nil {
					t.Fatal(err)
				}
				w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", RequiredAcks: kafka.RequireAll, Transport: tr},
					append(hermetic("az-a"), refusalBudget(), sdk.WithIdempotence(idem))...)
				if err != nil {
					t.Fatal(err)
				}
				err = w.WriteMessages(testCtx(t), deliverytest.Messages("c", 5)...)
				requireRefusal(t, fmt.Sprintf("Writer, idempotent=%v", idem), err, w.Stats().SDK.Retries, tc.wantWords...)
				w.Close()
				tr.CloseIdleConnections()
			}
			r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: "g", Topic: "events",
				Dialer: &kafka.Dialer{Timeout: 5 * time.Second, TLS: tc.client}, JoinGroupBackoff: 50 * time.Millisecond},
				append(hermetic("az-a"), refusalBudget())...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.ReadMessage(testCtx(t))
			requireRefusal(t, "Reader in a group", err, r.Stats().SDK.Retries, tc.wantWords...)
		})
	}
}

// TestProducerIDRefusedByAuthorizer: the embedded broker's authorizer, as
// Kafka 4.x's, gives a producer ID to a user with Write on a topic (no
// IdempotentWrite needed) and refuses one to a user who may only read.
// Explicit idempotence returns that refusal; auto warns once and takes the
// at-least-once path, which the authorizer refuses too. Nothing is
// retried, nothing stored.
func TestProducerIDRefusedByAuthorizer(t *testing.T) {
	topicACL := func(op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "events", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"),
		kfake.User("SCRAM-SHA-512", "alice", "alice-pw", topicACL(kmsg.ACLOperationWrite), topicACL(kmsg.ACLOperationDescribe)),
		kfake.User("SCRAM-SHA-512", "ro", "ro-pw", topicACL(kmsg.ACLOperationRead), topicACL(kmsg.ACLOperationDescribe)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	addr := k.ListenAddrs()[0]
	writer := func(user, pw string, logs *deliverytest.LogBuffer, opts ...sdk.Option) *sdk.Writer {
		t.Helper()
		mech, err := scram.Mechanism(scram.SHA512, user, pw)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := sdk.NewTransport(&kafka.Transport{SASL: mech}, hermetic("az-a")...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.CloseIdleConnections)
		opts = append(append(hermetic("az-a"), refusalBudget(),
			sdk.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))), opts...)
		w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addr), Topic: "events", RequiredAcks: kafka.RequireAll, Transport: tr}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		return w
	}

	// alice may write the topic: that is enough for a producer ID.
	var aliceLogs deliverytest.LogBuffer
	w := writer("alice", "alice-pw", &aliceLogs, sdk.WithIdempotence(true))
	if err := w.WriteMessages(testCtx(t), deliverytest.Messages("alice", 5)...); err != nil {
		t.Fatalf("alice: %v", err)
	}
	if st := w.Stats().SDK; !st.Idempotent || st.ProducerID < 0 {
		t.Fatalf("alice (Write on the topic) got no producer ID: %+v", st)
	}

	for _, explicit := range []bool{true, false} {
		var logs deliverytest.LogBuffer
		var opts []sdk.Option
		if explicit {
			opts = append(opts, sdk.WithIdempotence(true))
		}
		w := writer("ro", "ro-pw", &logs, opts...)
		err := w.WriteMessages(testCtx(t), deliverytest.Messages("ro", 5)...)
		if explicit {
			requireRefusal(t, "ro, explicit idempotence", err, w.Stats().SDK.Retries, "cluster authorization failed", "grant idempotentwrite")
			if !errors.Is(err, kafka.ClusterAuthorizationFailed) {
				t.Fatalf("explicit: errors.Is(err, ClusterAuthorizationFailed) is false: %v", err)
			}
			if logs.String() != "" {
				t.Fatalf("explicit: the refusal is the error, not a warning: %s", logs.String())
			}
			continue
		}
		requireRefusal(t, "ro, auto", err, w.Stats().SDK.Retries, "topic authorization failed")
		var we kafka.WriteErrors
		if !errors.As(err, &we) || len(we) != 5 {
			t.Fatalf("auto: want kafka.WriteErrors for the 5 messages: %v", err)
		}
		for i, e := range we {
			if !errors.Is(e, kafka.TopicAuthorizationFailed) {
				t.Fatalf("auto: message %d: %v", i, e)
			}
		}
		if n := strings.Count(logs.String(), "refused a producer ID"); n != 1 || !strings.Contains(logs.String(), "Cluster Authorization Failed") {
			t.Fatalf("auto: want one warning naming the refusal, got %d: %s", n, logs.String())
		}
	}
	admin, err := scram.Mechanism(scram.SHA512, "admin", "admin-pw")
	if err != nil {
		t.Fatal(err)
	}
	counts := deliverytest.ConsumeAll(testCtx(t), t, deliverytest.Topic{Addrs: []string{addr}, SASL: admin, Name: "events", Partitions: 3})
	if len(counts) != 5 {
		t.Fatalf("stored %d messages, want alice's 5", len(counts))
	}
	for v := range counts {
		if strings.HasPrefix(v, "ro-") {
			t.Fatalf("a message of the refused user was stored: %s", v)
		}
	}
}

// TestTLSOnPlaintextPortNamesTheCause: a client with TLS set against a
// port that closes the connection on the ClientHello (what a plaintext
// Kafka listener does: it reads the record as a frame size it refuses)
// gets an error that names the address and suggests the fix, from the
// Writer and the Reader alike.
func TestTLSOnPlaintextPortNamesTheCause(t *testing.T) {
	t.Parallel()
	addr := closingListener(t)
	check := func(who string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", who)
		}
		if msg := err.Error(); !strings.Contains(msg, addr) || !strings.Contains(msg, "plaintext listener") {
			t.Fatalf("%s: %v: want the address %s and the plaintext hint", who, err, addr)
		}
	}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(addr), Topic: "t", RequiredAcks: kafka.RequireAll,
		WriteTimeout: 100 * time.Millisecond, Transport: &kafka.Transport{TLS: &tls.Config{}}}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	werr := w.WriteMessages(ctx, kafka.Message{Value: []byte("v")})
	t.Logf("Writer: %v", werr)
	check("Writer", werr)
	w.Close()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: "t", Partition: 0,
		Dialer: &kafka.Dialer{TLS: &tls.Config{}}}, testOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	_, err = r.ReadMessage(rctx)
	check("Reader", err)
}
