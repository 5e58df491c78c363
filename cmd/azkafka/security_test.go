package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/azkafka/azkafka/internal/testkit/testpki"
)

// tlsBroker starts an embedded broker that requires TLS (a certificate of
// its own CA) and SASL/SCRAM-SHA-512 (user "ops", password "ops-pw"), and
// returns its address and the path of a PEM file holding the CA.
func tlsBroker(t *testing.T) (addr, caFile string) {
	t.Helper()
	ca := testpki.NewCA(t, "azkafka test CA")
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"),
		kfake.TLS(testpki.ServerConfig(ca.ValidServer(t))),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "ops", "ops-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k.ListenAddrs()[0], caFile
}

func withSASLPassword(t *testing.T, pw string) {
	t.Helper()
	old := securityGetenv
	securityGetenv = func(k string) string {
		if k == envSASLPassword {
			return pw
		}
		return ""
	}
	t.Cleanup(func() { securityGetenv = old })
}

func TestDiagnoseTLSAndSASL(t *testing.T) {
	addr, caFile := tlsBroker(t)
	withClientIDEnv(t, map[string]string{"AZKAFKA_AZ": "az-a"}, nil)
	sec := []string{"--tls-ca", caFile, "--sasl-mechanism", "scram-sha-512", "--sasl-user", "ops"}

	withSASLPassword(t, "ops-pw")
	var stdout, stderr bytes.Buffer
	if st := run(append([]string{"diagnose", "--bootstrap", addr, "--json", "--topic", "events"}, sec...), nil, &stdout, &stderr); st != exitOK {
		t.Fatalf("status %d, stderr %s", st, stderr.String())
	}
	var out diagnoseOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	if len(out.Brokers) != 1 || out.Brokers[0].RTTms < 0 || len(out.Topics) != 1 || out.Topics[0].Partitions != 2 {
		t.Fatalf("through TLS and SASL: brokers %+v, topics %+v", out.Brokers, out.Topics)
	}

	for _, tc := range []struct {
		name     string
		args     []string
		password string
		status   int
		want     []string
	}{
		{"no TLS", []string{"--sasl-mechanism", "scram-sha-512", "--sasl-user", "ops"}, "ops-pw", exitFail, []string{"no metadata from " + addr}},
		{"CA not given", []string{"--tls", "--sasl-mechanism", "scram-sha-512", "--sasl-user", "ops"}, "ops-pw", exitFail,
			[]string{"certificate", "check --tls-ca"}},
		{"no password", sec, "", exitUsage, []string{"AZKAFKA_SASL_PASSWORD is empty", `"ops"`}},
		{"unknown mechanism", []string{"--sasl-mechanism", "gssapi", "--sasl-user", "ops"}, "x", exitUsage, []string{`--sasl-mechanism="gssapi"`, "scram-sha-512"}},
		{"user without mechanism", []string{"--sasl-user", "ops"}, "x", exitUsage, []string{`--sasl-user="ops" without --sasl-mechanism`}},
		{"missing CA file", []string{"--tls-ca", filepath.Join(t.TempDir(), "none.pem")}, "", exitUsage, []string{"--tls-ca=", "none.pem"}},
		{"CA file without PEM", []string{"--tls-ca", os.Args[0]}, "", exitUsage, []string{"no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withSASLPassword(t, tc.password)
			var stdout, stderr bytes.Buffer
			st := run(append([]string{"diagnose", "--bootstrap", addr, "--timeout", "5s"}, tc.args...), nil, &stdout, &stderr)
			t.Logf("status %d: %s", st, strings.TrimSpace(stderr.String()))
			if st != tc.status {
				t.Fatalf("status %d, want %d; stderr %s", st, tc.status, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Fatalf("stderr does not say %q: %s", w, stderr.String())
				}
			}
		})
	}
}
