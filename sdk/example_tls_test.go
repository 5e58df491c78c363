package sdk_test

import (
	"crypto/tls"
	"crypto/x509"
	"log"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/azkafka/azkafka/sdk"
)

// A Writer and a Reader on a SASL_SSL listener: TLS and SASL go where
// kafka-go takes them, the Writer's kafka.Transport and the Reader's
// kafka.Dialer. (Compiled, not run: it needs a broker with TLS and SCRAM.)
func Example_tlsAndSASL() {
	brokers := []string{"kafka-0.example.com:9094"}
	ca, err := os.ReadFile("ca.pem") // or leave RootCAs nil for the system's CAs
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	tlsConfig := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	mechanism, err := scram.Mechanism(scram.SHA512, "billing", os.Getenv("KAFKA_PASSWORD"))
	if err != nil {
		log.Fatal(err)
	}

	w, err := sdk.NewWriter(&kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events", RequiredAcks: kafka.RequireAll,
		Transport: &kafka.Transport{TLS: tlsConfig, SASL: mechanism}})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	r, err := sdk.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "billing", Topic: "events",
		Dialer: &kafka.Dialer{Timeout: 10 * time.Second, TLS: tlsConfig, SASLMechanism: mechanism}})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
}
