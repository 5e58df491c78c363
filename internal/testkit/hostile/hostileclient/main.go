// Command hostileclient runs one client of the SDK (or, as a control, of
// kafka-go alone) against one broker address, makes one call, closes the
// client, and prints one JSON line: the error the call returned, what the
// client logged as errors, and how long the call and Close took.
//
// The hostile-server tests run it as a subprocess so that a panic in any
// goroutine, or a runaway allocation, ends that process and is measured
// (exit status, peak RSS) instead of taking the test binary down. Its
// address space is capped (-max-vm) so that a client that allocates
// gigabytes fails fast instead of swapping the machine.
//
//	hostileclient -client sdk.Writer/idempotent -addr 127.0.0.1:9092 -timeout 3s
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/iq"
	"github.com/azkafka/azkafka/sdk"
)

// Result is the JSON line printed.
type Result struct {
	Err     string   `json:"err"`
	Logged  []string `json:"logged,omitempty"`
	OpMs    int64    `json:"op_ms"`
	CloseMs int64    `json:"close_ms"`
}

// client makes one call against addr.
type client func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call

// call is what a client's call returned, and the client's Close (nil when
// no client was made).
type call struct {
	err   error
	close func() error
}

// Clients lists the clients by name; the control ones (kafka-go without
// the SDK) are named raw/....
var clients = map[string]client{
	"sdk.Writer/idempotent": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		return sdkWriter(ctx, addr, cfg, log, kafka.RequireAll)
	},
	"sdk.Writer/acks=1": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		return sdkWriter(ctx, addr, cfg, log, kafka.RequireOne)
	},
	"sdk.Reader": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		r, err := sdk.NewReader(kafka.ReaderConfig{
			Brokers: []string{addr}, GroupID: "g", Topic: "hostile", MaxWait: 500 * time.Millisecond,
			Dialer: &kafka.Dialer{Timeout: 2 * time.Second, TLS: cfg}, ErrorLogger: log,
		}, hermetic(log)...)
		if err != nil {
			return call{err: err}
		}
		_, err = r.ReadMessage(ctx)
		return call{err, r.Close}
	},
	"kafka.Writer+NewTransport": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		tr, err := sdk.NewTransport(&kafka.Transport{TLS: cfg, DialTimeout: 2 * time.Second}, hermetic(log)...)
		if err != nil {
			return call{err: err}
		}
		return kafkaGoWriter(ctx, addr, tr, log)
	},
	"kafka.Reader+NewAZAwareDialer": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		d, err := sdk.NewAZAwareDialer(&kafka.Dialer{Timeout: 2 * time.Second, TLS: cfg}, hermetic(log)...)
		if err != nil {
			return call{err: err}
		}
		return kafkaGoReader(ctx, addr, d, log)
	},
	"kafka.Client+NewTransport": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		tr, err := sdk.NewTransport(&kafka.Transport{TLS: cfg, DialTimeout: 2 * time.Second}, hermetic(log)...)
		if err != nil {
			return call{err: err}
		}
		return kafkaGoClient(ctx, addr, tr)
	},
	"iq.NewClusterSource": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		opts := []iq.Option{iq.WithLogger(slog.New(log))}
		if cfg != nil {
			tr, err := sdk.NewTransport(&kafka.Transport{TLS: cfg, DialTimeout: 2 * time.Second}, hermetic(log)...)
			if err != nil {
				return call{err: err}
			}
			opts = append(opts, iq.WithTransport(tr))
		}
		s, err := iq.NewClusterSource([]string{addr}, "g", opts...)
		if err != nil {
			return call{err: err}
		}
		return call{s.Refresh(ctx), s.Close}
	},
	"raw/kafka.Writer": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		return kafkaGoWriter(ctx, addr, &kafka.Transport{TLS: cfg, DialTimeout: 2 * time.Second}, log)
	},
	"raw/kafka.Reader": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		return kafkaGoReader(ctx, addr, &kafka.Dialer{Timeout: 2 * time.Second, TLS: cfg}, log)
	},
	"raw/kafka.Client": func(ctx context.Context, addr string, cfg *tls.Config, log *errLog) call {
		return kafkaGoClient(ctx, addr, &kafka.Transport{TLS: cfg, DialTimeout: 2 * time.Second})
	},
}

func sdkWriter(ctx context.Context, addr string, cfg *tls.Config, log *errLog, acks kafka.RequiredAcks) call {
	// The SDK's defaults: Close is bounded by WriteTimeout (10 s), and
	// never waits for the message of a call that already returned.
	w, err := sdk.NewWriter(&kafka.Writer{
		Addr: kafka.TCP(addr), Topic: "hostile", RequiredAcks: acks, ErrorLogger: log,
		Transport: &kafka.Transport{TLS: cfg, DialTimeout: 2 * time.Second},
	}, hermetic(log)...)
	if err != nil {
		return call{err: err}
	}
	return call{w.WriteMessages(ctx, kafka.Message{Value: []byte("v")}), w.Close}
}

func kafkaGoWriter(ctx context.Context, addr string, tr kafka.RoundTripper, log *errLog) call {
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: "hostile", RequiredAcks: kafka.RequireOne, Transport: tr, ErrorLogger: log}
	return call{w.WriteMessages(ctx, kafka.Message{Value: []byte("v")}), w.Close}
}

func kafkaGoReader(ctx context.Context, addr string, d *kafka.Dialer, log *errLog) call {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{addr}, Topic: "hostile", Partition: 0, Dialer: d,
		MaxWait: 500 * time.Millisecond, ErrorLogger: log,
	})
	_, err := r.ReadMessage(ctx)
	return call{err, r.Close}
}

func kafkaGoClient(ctx context.Context, addr string, tr kafka.RoundTripper) call {
	cl := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr}
	_, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
	return call{err, func() error {
		if t, ok := tr.(*kafka.Transport); ok {
			t.CloseIdleConnections()
		}
		return nil
	}}
}

// hermetic are the options of every SDK client here: a known AZ, no
// environment, the log to errLog.
func hermetic(log *errLog) []sdk.Option {
	return []sdk.Option{sdk.WithAZ("az1"), sdk.WithGetenv(func(string) string { return "" }), sdk.WithLogger(slog.New(log))}
}

// errLog keeps the distinct error lines a client logs: kafka-go's
// ErrorLogger and slog records at Warn and above.
type errLog struct {
	mu    sync.Mutex
	lines map[string]bool
}

func (l *errLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = map[string]bool{}
	}
	if len(l.lines) < 50 {
		l.lines[s] = true
	}
}

// Printf implements kafka.Logger.
func (l *errLog) Printf(format string, args ...any) { l.add(fmt.Sprintf(format, args...)) }

func (l *errLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }
func (l *errLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.add(b.String())
	return nil
}
func (l *errLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errLog) WithGroup(string) slog.Handler      { return l }

func (l *errLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for s := range l.lines {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func main() {
	name := flag.String("client", "", "the client to run")
	addr := flag.String("addr", "", "broker host:port")
	timeout := flag.Duration("timeout", 3*time.Second, "the call's context timeout")
	useTLS := flag.Bool("tls", false, "dial with TLS (certificates not verified)")
	maxVM := flag.Int64("max-vm", 4<<30, "address-space limit of the process, bytes")
	flag.Parse()
	c, ok := clients[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "hostileclient: unknown -client %q\n", *name)
		os.Exit(2)
	}
	if *maxVM > 0 {
		lim := &syscall.Rlimit{Cur: uint64(*maxVM), Max: uint64(*maxVM)}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
			fmt.Fprintf(os.Stderr, "hostileclient: setrlimit: %v\n", err)
			os.Exit(2)
		}
	}
	var cfg *tls.Config
	if *useTLS {
		cfg = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a test client; the server never completes a handshake
	}
	log := &errLog{}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	out := c(ctx, *addr, cfg, log)
	res := Result{OpMs: time.Since(start).Milliseconds()}
	if out.err != nil {
		res.Err = out.err.Error()
	}
	start = time.Now()
	if out.close != nil {
		if err := out.close(); err != nil && !errors.Is(err, context.Canceled) {
			log.add("close: " + err.Error())
		}
	}
	res.CloseMs = time.Since(start).Milliseconds()
	res.Logged = log.list()
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(2)
	}
}
