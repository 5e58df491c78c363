package difftest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/segmentio/kafka-go"
)

// probes are the errors.Is targets a kafka-go program tests.
var probes = []struct {
	name   string
	target error
}{
	{"context.Canceled", context.Canceled},
	{"context.DeadlineExceeded", context.DeadlineExceeded},
	{"io.EOF", io.EOF},
	{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF},
	{"io.ErrClosedPipe", io.ErrClosedPipe},
	{"net.ErrClosed", net.ErrClosed},
	{"ECONNREFUSED", syscall.ECONNREFUSED},
	{"ECONNRESET", syscall.ECONNRESET},
}

// Shape renders what a kafka-go program can learn of err with errors.Is
// and errors.As: "nil", or the probes it matches, the kafka.Error code,
// kafka.MessageTooLargeError, kafka.WriteErrors (with each message's
// shape) and the net and tls error types. The text of err is not part of
// it.
func Shape(err error) string {
	if err == nil {
		return "nil"
	}
	var pe panicError
	if errors.As(err, &pe) {
		return "panic"
	}
	var parts []string
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		parts = append(parts, writeErrorsShape(we))
	}
	var mt kafka.MessageTooLargeError
	if errors.As(err, &mt) {
		parts = append(parts, fmt.Sprintf("MessageTooLargeError(remaining=%d)", len(mt.Remaining)))
	}
	var mtp *kafka.MessageTooLargeError
	if errors.As(err, &mtp) {
		parts = append(parts, "*MessageTooLargeError")
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		parts = append(parts, fmt.Sprintf("kafka.Error(%d %s)", int(ke), ke.Title()))
	}
	for _, p := range probes {
		if errors.Is(err, p.target) {
			parts = append(parts, p.name)
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		parts = append(parts, "*net.DNSError")
	}
	var op *net.OpError
	if errors.As(err, &op) {
		parts = append(parts, "*net.OpError")
	}
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) {
		parts = append(parts, "*tls.CertificateVerificationError")
	}
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) {
		parts = append(parts, "tls.RecordHeaderError")
	}
	if len(parts) == 0 {
		return "error"
	}
	return "error{" + strings.Join(parts, " ") + "}"
}

// writeErrorsShape renders a kafka.WriteErrors as its length and runs of
// equal shapes: WriteErrors[3]{0-1:nil 2:error{...}}.
func writeErrorsShape(we kafka.WriteErrors) string {
	var b strings.Builder
	fmt.Fprintf(&b, "WriteErrors[%d]{", len(we))
	for i := 0; i < len(we); {
		sh := elemShape(we[i])
		j := i + 1
		for j < len(we) && elemShape(we[j]) == sh {
			j++
		}
		if i > 0 {
			b.WriteString(" ")
		}
		if j-i == 1 {
			fmt.Fprintf(&b, "%d:%s", i, sh)
		} else {
			fmt.Fprintf(&b, "%d-%d:%s", i, j-1, sh)
		}
		i = j
	}
	b.WriteString("}")
	return b.String()
}

func elemShape(err error) string {
	if err == nil {
		return "nil"
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		return "nested-WriteErrors"
	}
	return Shape(err)
}
