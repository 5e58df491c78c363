package wire_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/kframe"
	"github.com/azkafka/azkafka/internal/testkit/embedded"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// nopeMechanism is a SASL mechanism no broker offers.
type nopeMechanism struct{}

func (nopeMechanism) Name() string { return "NOPE" }
func (nopeMechanism) Start(context.Context) (sasl.StateMachine, []byte, error) {
	return nil, nil, errors.New("not reached")
}

// TestDialAuthenticates dials with the transport's SASL mechanism against
// the embedded broker, which answers a request only once the connection is
// authenticated.
func TestDialAuthenticates(t *testing.T) {
	c := embedded.StartT(t, embedded.KfakeOptions(kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret")))
	addr := c.Addrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(m sasl.Mechanism) (net.Conn, error) {
		return wire.Dial(ctx, &kafka.Transport{SASL: m}, addr, "iq-test", 0)
	}
	conn, err := dial(plain.Mechanism{Username: "admin", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := kframe.Request(conn, "iq-test", 1, kmsg.NewPtrMetadataRequest())
	conn.Close()
	if err != nil || len(resp.(*kmsg.MetadataResponse).Brokers) != 1 {
		t.Fatalf("metadata after authenticating: %+v, %v", resp, err)
	}
	for _, c := range []struct {
		mech sasl.Mechanism
		want string
	}{
		// The embedded broker closes the connection where Kafka answers
		// SASL_AUTHENTICATION_FAILED first.
		{plain.Mechanism{Username: "admin", Password: "wrong"}, "SASL authenticate with " + addr + ": EOF"},
		{nopeMechanism{}, "SASL handshake with " + addr + ": mechanism NOPE refused (UNSUPPORTED_SASL_MECHANISM; the broker offers PLAIN"},
	} {
		conn, err := dial(c.mech)
		if err == nil {
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.mech.Name(), err, c.want)
		}
	}
}
