//go:build conformance

package conformance

// The SDK through a SASL_SSL listener of a real broker: SCRAM-SHA-512
// users created by the broker's own StorageTool, a throwaway CA and broker
// certificates made at run time, and the StandardAuthorizer. The good path
// (idempotent Writer, Reader in a group) and the bad ones: wrong password,
// unknown user, a CA that does not match, an expired broker certificate,
// and a user the authorizer refuses a producer ID. A bad credential or
// certificate must come back as a clear, non-transient error, never be
// retried as a close until the budget runs out.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/azkafka/azkafka/internal/testkit/deliverytest"
	"github.com/azkafka/azkafka/internal/testkit/testpki"
	"github.com/azkafka/azkafka/retry"
	"github.com/azkafka/azkafka/sdk"
)

// writeKeystore writes cert as a PEM keystore into dir and returns its
// path.
func writeKeystore(t *testing.T, dir, name string, cert tls.Certificate) string {
	t.Helper()
	path := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(path, testpki.KeystorePEM(t, cert), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secureRig is a dedicated broker with a PLAINTEXT listener (the test's
// own setup and checks, as the super user ANONYMOUS), a SASL_SSL listener
// with a valid certificate and an EXPIRED one (SASL_SSL too) whose
// certificate has expired; SCRAM-SHA-512 users alice (may write and read
// the topic), ro (may only read it) and the StandardAuthorizer.
type secureRig struct {
	broker   *dedicatedBroker
	ca       *testpki.CA
	topic    string
	group    string
	password map[string]string
}

const (
	secureTopic      = "secure-events"
	secureGroup      = "secure-group"
	securePartitions = 6
)

func newSecureRig(t *testing.T) *secureRig {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "azkafka test CA")
	now := time.Now()
	good := writeKeystore(t, dir, "broker", ca.ValidServer(t))
	expired := writeKeystore(t, dir, "expired", ca.Server(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour)))
	pw := map[string]string{"alice": "alice-" + randomToken(t), "ro": "ro-" + randomToken(t)}
	extra := append(saslSSLListeners(map[string]string{"SASL_SSL": good, "EXPIRED": expired}),
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		// The PLAINTEXT and controller listeners' principal.
		"super.users=User:ANONYMOUS")
	b := startDedicatedBrokerWith(t, dedicatedConfig{
		ports:      []string{"SASL_SSL_PORT", "EXPIRED_PORT"},
		extra:      extra,
		formatArgs: scramUsers(pw),
	})
	r := &secureRig{broker: b, ca: ca, topic: secureTopic, group: secureGroup, password: pw}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, ctx, b.Addrs(), r.topic, securePartitions)
	acl := func(user string, rt kafka.ResourceType, name string, op kafka.ACLOperationType) kafka.ACLEntry {
		return kafka.ACLEntry{ResourceType: rt, ResourceName: name, ResourcePatternType: kafka.PatternTypeLiteral,
			Principal: "User:" + user, Host: "*", Operation: op, PermissionType: kafka.ACLPermissionTypeAllow}
	}
	acls := []kafka.ACLEntry{
		acl("alice", kafka.ResourceTypeTopic, r.topic, kafka.ACLOperationTypeWrite),
		acl("alice", kafka.ResourceTypeTopic, r.topic, kafka.ACLOperationTypeRead),
		acl("alice", kafka.ResourceTypeTopic, r.topic, kafka.ACLOperationTypeDescribe),
		acl("alice", kafka.ResourceTypeGroup, r.group, kafka.ACLOperationTypeRead),
		acl("ro", kafka.ResourceTypeTopic, r.topic, kafka.ACLOperationTypeRead),
		acl("ro", kafka.ResourceTypeTopic, r.topic, kafka.ACLOperationTypeDescribe),
		acl("ro", kafka.ResourceTypeGroup, r.group, kafka.ACLOperationTypeRead),
	}
	cl := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
	res, err := cl.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: acls})
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for i, e := range res.Errors {
		if e != nil {
			t.Fatalf("CreateACLs %+v: %v", acls[i], e)
		}
	}
	// The controller commits the ACLs; the broker applies them from its
	// metadata log a moment later. DescribeAcls answers from the broker's
	// authorizer: wait until it holds them all.
	for {
		d, err := cl.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: kafka.ACLFilter{
			ResourceTypeFilter: kafka.ResourceTypeAny, ResourcePatternTypeFilter: kafka.PatternTypeAny,
			Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny}})
		n := 0
		if err == nil && d.Error == nil {
			for _, res := range d.Resources {
				n += len(res.ACLs)
			}
		}
		if n >= len(acls) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the broker holds %d of %d ACLs (%v, last error %v)", n, len(acls), ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return r
}

// scramUsers are the StorageTool format arguments that create the
// SCRAM-SHA-512 users of passwords.
func scramUsers(passwords map[string]string) []string {
	users := make([]string, 0, len(passwords))
	for u := range passwords {
		users = append(users, u)
	}
	sort.Strings(users)
	var args []string
	for _, u := range users {
		args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u, passwords[u]))
	}
	return args
}

// saslSSLListeners are the config lines of a node with its PLAINTEXT and
// CONTROLLER listeners plus one SASL_SSL listener (SCRAM-SHA-512) per key
// of keystores, named as the key, on the node's port @<NAME>_PORT@, with
// that PEM keystore.
func saslSSLListeners(keystores map[string]string) []string {
	names := make([]string, 0, len(keystores))
	for name := range keystores {
		names = append(names, name)
	}
	sort.Strings(names)
	listeners := []string{"PLAINTEXT://127.0.0.1:@BROKER_PORT@", "CONTROLLER://127.0.0.1:@CONTROLLER_PORT@"}
	protocols := []string{"PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"}
	var lines []string
	for _, name := range names {
		lower := strings.ToLower(name)
		listeners = append(listeners, fmt.Sprintf("%s://127.0.0.1:@%s_PORT@", name, name))
		protocols = append(protocols, name+":SASL_SSL")
		lines = append(lines,
			"listener.name."+lower+".scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
			"listener.name."+lower+".ssl.keystore.type=PEM",
			"listener.name."+lower+".ssl.keystore.location="+keystores[name])
	}
	return append([]string{
		"listeners=" + strings.Join(listeners, ","),
		"advertised.listeners=" + strings.Join(listeners, ","),
		"listener.security.protocol.map=" + strings.Join(protocols, ","),
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
	}, lines...)
}

func randomToken(t *testing.T) string {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", b)
}

func (r *secureRig) saslSSL() string {
	return "127.0.0.1:" + strconv.Itoa(r.broker.Port("SASL_SSL_PORT"))
}

func (r *secureRig) expiredAddr() string {
	return "127.0.0.1:" + strconv.Itoa(r.broker.Port("EXPIRED_PORT"))
}

func (r *secureRig) mechanism(t *testing.T, user, password string) sasl.Mechanism {
	t.Helper()
	m, err := scram.Mechanism(scram.SHA512, user, password)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkTopic reads the topic through the PLAINTEXT listener.
func (r *secureRig) checkTopic() deliverytest.Topic {
	return deliverytest.Topic{Addrs: r.broker.Addrs(), Name: r.topic, Partitions: securePartitions}
}

// secureClient is how a user reaches the broker: address, TLS and SASL.
type secureClient struct {
	addr string
	tls  *tls.Config
	mech sasl.Mechanism
}

// writer is an sdk.Writer through c with a retry budget of minutes: an
// error retried as transient would take that long, a refusal returns at
// once.
func (c secureClient) writer(t *testing.T, topic string, logs *deliverytest.LogBuffer, opts ...sdk.Option) *sdk.Writer {
	t.Helper()
	tr, err := sdk.NewTransport(&kafka.Transport{TLS: c.tls, SASL: c.mech}, sdkcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	opts = append(append(sdkcOptions(), sdk.WithRetry(1000, 20*time.Millisecond, 200*time.Millisecond)), opts...)
	if logs != nil {
		opts = append(opts, sdk.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	}
	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(c.addr), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, Transport: tr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func (c secureClient) reader(t *testing.T, topic, group string) *sdk.Reader {
	t.Helper()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: []string{c.addr}, GroupID: group, Topic: topic,
		Dialer:         &kafka.Dialer{Timeout: 10 * time.Second, TLS: c.tls, SASLMechanism: c.mech},
		StartOffset:    kafka.FirstOffset,
		MaxWait:        200 * time.Millisecond,
		CommitInterval: 0,
	}, sdkcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestSDKSASLSSL: the idempotent Writer and a Reader in a group through
// SASL_SSL (SCRAM-SHA-512, TLS verified against the test's CA), then every
// way of being refused.
func TestSDKSASLSSL(t *testing.T) {
	rig := newSecureRig(t)
	trusted := rig.ca.ClientConfig()
	alice := secureClient{addr: rig.saslSSL(), tls: trusted, mech: rig.mechanism(t, "alice", rig.password["alice"])}

	t.Run("authorized", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		w := alice.writer(t, rig.topic, nil)
		sent := deliverytest.Messages("s", 2000)
		for i := 0; i < len(sent); i += 50 {
			if err := w.WriteMessages(ctx, sent[i:i+50]...); err != nil {
				t.Fatalf("WriteMessages through SASL_SSL: %v", err)
			}
		}
		st := w.Stats().SDK
		if !st.Idempotent || st.ProducerID < 0 {
			t.Fatalf("the Writer is not idempotent through SASL_SSL: %+v", st)
		}
		parts := deliverytest.PartitionValues(ctx, t, rig.checkTopic())
		counts := map[string]int{}
		for _, vals := range parts {
			for _, v := range vals {
				counts[v]++
			}
		}
		lost, dups := deliverytest.LostAndDuplicated(sent, counts)
		if n := reorders(parts, func(int) int { return 0 }); lost != 0 || dups != 0 || n != 0 {
			t.Fatalf("stored: %d lost, %d duplicates, %d out of order", lost, dups, n)
		}

		r := alice.reader(t, rig.topic, rig.group)
		seen := map[string]int{}
		ends := make(chan map[int]int64, 1)
		ends <- deliverytest.EndOffsets(ctx, t, rig.checkTopic())
		if err := deliverytest.ConsumeToEnd(ctx, r, len(sent), ends, seen); err != nil {
			t.Fatalf("Reader through SASL_SSL: %v", err)
		}
		if lost, _ := deliverytest.LostAndDuplicated(sent, seen); lost != 0 {
			t.Fatalf("the Reader missed %d messages", lost)
		}
		deliverytest.RequireCommittedToEnd(ctx, t, rig.checkTopic(), rig.group)
		t.Logf("SASL_SSL, SCRAM-SHA-512, user alice (Write on the topic, no IdempotentWrite): %d messages written idempotently (producer ID %d), 0 lost, 0 duplicates, in order; read by the group, committed to the end",
			len(sent), st.ProducerID)
	})

	otherCA := testpki.NewCA(t, "another CA")
	refusals := []struct {
		name   string
		client secureClient
		want   []string // every one in the error text, case-insensitive
		is     error    // when set, errors.Is must hold
	}{
		{"wrong password", secureClient{addr: rig.saslSSL(), tls: trusted, mech: rig.mechanism(t, "alice", "not-"+rig.password["alice"])},
			[]string{"sasl", "authentication failed"}, kafka.SASLAuthenticationFailed},
		{"unknown user", secureClient{addr: rig.saslSSL(), tls: trusted, mech: rig.mechanism(t, "mallory", "whatever")},
			[]string{"sasl", "authentication failed"}, kafka.SASLAuthenticationFailed},
		{"a SASL mechanism the broker lacks", secureClient{addr: rig.saslSSL(), tls: trusted, mech: plain.Mechanism{Username: "alice", Password: rig.password["alice"]}},
			[]string{"sasl", "mechanism"}, kafka.UnsupportedSASLMechanism},
		{"CA does not match", secureClient{addr: rig.saslSSL(), tls: otherCA.ClientConfig(), mech: alice.mech},
			[]string{"certificate", "unknown authority"}, nil},
		{"expired certificate", secureClient{addr: rig.expiredAddr(), tls: trusted, mech: alice.mech},
			[]string{"certificate", "expired"}, nil},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error, took time.Duration, retries int64) {
				t.Helper()
				t.Logf("%s, %s: %v after %v, %d retries", tc.name, what, err, took.Round(time.Millisecond), retries)
				if err == nil {
					t.Fatalf("%s: no error", what)
				}
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					t.Fatalf("%s: the refusal was retried until the test's deadline: %v", what, err)
				}
				text := strings.ToLower(err.Error())
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Fatalf("%s: the error does not say %q: %v", what, w, err)
					}
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Fatalf("%s: errors.Is(err, %v) is false: %v", what, tc.is, err)
				}
				if retry.IsTransient(err) {
					t.Fatalf("%s: retry.IsTransient is true for %v", what, err)
				}
				if retries != 0 {
					t.Fatalf("%s: %d retries of a refusal", what, retries)
				}
			}
			for _, idem := range []bool{true, false} {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				w := tc.client.writer(t, rig.topic, nil, sdk.WithIdempotence(idem))
				start := time.Now()
				err := w.WriteMessages(ctx, deliverytest.Messages("refused", 10)...)
				check(fmt.Sprintf("Writer (idempotent=%v)", idem), err, time.Since(start), w.Stats().SDK.Retries)
				cancel()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := tc.client.reader(t, rig.topic, rig.group+"-refused")
			start := time.Now()
			_, err := r.ReadMessage(ctx)
			check("Reader in a group", err, time.Since(start), r.Stats().SDK.Retries)
		})
	}

	// A user without Write on any topic and without IdempotentWrite: Kafka
	// 4.3's authorizer refuses it a producer ID.
	t.Run("producer ID refused by the authorizer", func(t *testing.T) {
		ro := secureClient{addr: rig.saslSSL(), tls: trusted, mech: rig.mechanism(t, "ro", rig.password["ro"])}
		for _, explicit := range []bool{true, false} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			var logs deliverytest.LogBuffer
			var opts []sdk.Option
			if explicit {
				opts = append(opts, sdk.WithIdempotence(true))
			}
			w := ro.writer(t, rig.topic, &logs, opts...)
			start := time.Now()
			err := w.WriteMessages(ctx, deliverytest.Messages("ro", 10)...)
			took := time.Since(start)
			cancel()
			st := w.Stats().SDK
			shown := fmt.Sprint(err)
			var we kafka.WriteErrors
			if errors.As(err, &we) && len(we) > 0 {
				shown = fmt.Sprintf("kafka.WriteErrors, %d entries, the first: %v", len(we), we[0])
			}
			t.Logf("user ro, idempotence %s: %s after %v, %d retries; warnings: %s", map[bool]string{true: "true", false: "auto"}[explicit],
				shown, took.Round(time.Millisecond), st.Retries, strings.TrimSpace(logs.String()))
			if st.Retries != 0 || retry.IsTransient(err) {
				t.Fatalf("a refusal was retried (%d retries, transient %v)", st.Retries, retry.IsTransient(err))
			}
			if explicit {
				// Explicit true: the refusal itself, never a silent
				// at-least-once write.
				if !errors.Is(err, kafka.ClusterAuthorizationFailed) {
					t.Fatalf("explicit true: want CLUSTER_AUTHORIZATION_FAILED, got %v", err)
				}
				continue
			}
			// auto: one warning naming the refusal, then the at-least-once
			// path, which this user may not take either.
			if n := strings.Count(logs.String(), "refused a producer ID"); n != 1 || !strings.Contains(logs.String(), "Cluster Authorization Failed") {
				t.Fatalf("auto: want one warning naming the refusal, got %d: %s", n, logs.String())
			}
			if !errors.As(err, &we) || len(we) != 10 {
				t.Fatalf("auto: want kafka.WriteErrors for the 10 messages, got %v", err)
			}
			for i, e := range we {
				if !errors.Is(e, kafka.TopicAuthorizationFailed) {
					t.Fatalf("auto: message %d: want TOPIC_AUTHORIZATION_FAILED from the at-least-once path, got %v", i, e)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		counts := deliverytest.ConsumeAll(ctx, t, rig.checkTopic())

		for v := range counts {
			if strings.HasPrefix(v, "ro-") {
				t.Fatalf("a message of the refused user was stored: %s", v)
			}
		}
	})
}
