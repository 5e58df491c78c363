package testpki_test

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/azkafka/azkafka/internal/testkit/testpki"
)

// handshake runs a TLS handshake between server and client on loopback
// and returns the client's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		c.Close()
	}
	return err
}

func TestCertificates(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	other := testpki.NewCA(t, "other CA")
	now := time.Now()
	for _, tc := range []struct {
		name   string
		cert   tls.Certificate
		client *tls.Config
		want   string // "" for success
	}{
		{"valid", ca.ValidServer(t), ca.ClientConfig(), ""},
		{"expired", ca.Server(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour)), ca.ClientConfig(), "expired"},
		{"other CA", ca.ValidServer(t), other.ClientConfig(), "unknown authority"},
	} {
		err := handshake(t, testpki.ServerConfig(tc.cert), tc.client)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: handshake error %v, want %q", tc.name, err, tc.want)
		}
	}
	// The PEM forms parse back.
	if !ca.ClientConfig().RootCAs.Equal(ca.Pool) || len(ca.PEM()) == 0 {
		t.Fatal("CA PEM or pool")
	}
	ks := testpki.KeystorePEM(t, ca.ValidServer(t))
	if _, err := tls.X509KeyPair(ks, ks); err != nil {
		t.Fatalf("keystore PEM does not parse as a key pair: %v", err)
	}
}
