package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/azkafka/azkafka/internal/settings"
)

// envSASLPassword holds the SASL password of the commands that reach
// brokers, so that it is never on a command line (ps, shell history).
const envSASLPassword = "AZKAFKA_SASL_PASSWORD"

// securityGetenv is where the commands read the SASL password; tests
// replace it.
var securityGetenv = os.Getenv

// cliSettings is what the command's own variables set.
type cliSettings struct{ saslPassword string }

// cliVars is the table of the command's own variables (see package
// internal/settings; TestREADMEConfigTable generates the README's row).
var cliVars = []settings.Var[cliSettings]{
	{Name: envSASLPassword, Default: "none", Option: "--sasl-user",
		Doc: "The `azkafka` commands only: the password for `--sasl-user`. The SDK takes SASL from your `kafka.Transport` and `kafka.Dialer`.",
		Set: func(c *cliSettings, v string) error { c.saslPassword = v; return nil }},
}

func init() { settings.Register("azkafka", cliVars, func() cliSettings { return cliSettings{} }) }

const securityUsage = `  --tls               connect with TLS, verifying the brokers against the
                      system's CAs (or --tls-ca)
  --tls-ca FILE       PEM file of the CAs to trust (implies --tls)
  --tls-server-name N the name to verify the brokers' certificates against
                      (default: the host of each address)
  --sasl-mechanism M  plain, scram-sha-256 or scram-sha-512
  --sasl-user U       the SASL user; the password is read from
                      AZKAFKA_SASL_PASSWORD, never from a flag
`

// securityFlags are the TLS and SASL flags of the commands that reach
// brokers.
type securityFlags struct {
	tls        bool
	caFile     string
	serverName string
	mechanism  string
	user       string
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.tls, "tls", false, "")
	fs.StringVar(&s.caFile, "tls-ca", "", "")
	fs.StringVar(&s.serverName, "tls-server-name", "", "")
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "")
	fs.StringVar(&s.user, "sasl-user", "", "")
}

// transport returns a kafka.Transport carrying the TLS and SASL settings,
// or nil when none is set. Errors name the flag or variable at fault.
func (s *securityFlags) transport() (*kafka.Transport, error) {
	cfg, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	mech, err := s.sasl()
	if err != nil {
		return nil, err
	}
	if cfg == nil && mech == nil {
		return nil, nil
	}
	return &kafka.Transport{TLS: cfg, SASL: mech}, nil
}

func (s *securityFlags) tlsConfig() (*tls.Config, error) {
	if !s.tls && s.caFile == "" && s.serverName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.serverName}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca=%s: %w", strconv.Quote(s.caFile), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca=%s: no PEM certificate in the file", strconv.Quote(s.caFile))
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func (s *securityFlags) sasl() (sasl.Mechanism, error) {
	if s.mechanism == "" {
		if s.user != "" {
			return nil, fmt.Errorf("--sasl-user=%s without --sasl-mechanism (plain, scram-sha-256 or scram-sha-512)", strconv.Quote(s.user))
		}
		return nil, nil
	}
	if s.user == "" {
		return nil, fmt.Errorf("--sasl-mechanism=%s needs --sasl-user", strconv.Quote(s.mechanism))
	}
	password := securityGetenv(envSASLPassword)
	if password == "" {
		return nil, fmt.Errorf("--sasl-mechanism=%s: %s is empty: set it to the password of %s", strconv.Quote(s.mechanism), envSASLPassword, strconv.Quote(s.user))
	}
	switch strings.ToLower(s.mechanism) {
	case "plain":
		return plain.Mechanism{Username: s.user, Password: password}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, s.user, password)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, s.user, password)
	}
	return nil, fmt.Errorf("--sasl-mechanism=%s: want plain, scram-sha-256 or scram-sha-512", strconv.Quote(s.mechanism))
}

// refusalHint tells an operator what to check when the brokers refused the
// connection rather than being unreachable.
func refusalHint(err error) string {
	var cve *tls.CertificateVerificationError
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return "the brokers refused the SASL credentials: check --sasl-user, " + envSASLPassword + " and --sasl-mechanism"
	case errors.As(err, &cve):
		return "the brokers' certificate was not trusted: check --tls-ca and --tls-server-name"
	case errors.Is(err, kafka.TopicAuthorizationFailed), errors.Is(err, kafka.ClusterAuthorizationFailed), errors.Is(err, kafka.GroupAuthorizationFailed):
		return "the brokers' authorizer refused the request: check the user's ACLs"
	}
	return "check the address, the network path, and --tls / --sasl-* for the listener"
}
