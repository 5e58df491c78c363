package sdk

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/retry"
	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/google/uuid"

	"github.com/azkafka/azkafka/internal/envcheck"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/internal/settings/settingstest"
)

// env returns a getenv over m.
func env(m map[string]string) Option {
	return WithGetenv(func(k string) string { return m[k] })
}

// noDetect fails the test if detection runs: tests must never reach a
// metadata service.
func noDetect(t *testing.T) Option {
	return WithDetector(func(context.Context) (azdetect.Result, error) {
		t.Error("AZ detection ran")
		return azdetect.Result{}, azdetect.ErrNoAZ
	})
}

func TestConfigEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		opts  []Option
		check func(t *testing.T, c config)
	}{
		{"defaults", map[string]string{"AZKAFKA_AZ": "us-east-1a"}, nil, func(t *testing.T, c config) {
			if c.az != "us-east-1a" || c.azSource != "env" || !c.interzoneLB || c.userID != "" {
				t.Errorf("got %+v", c)
			}
			if _, err := uuid.Parse(c.sessionID); err != nil {
				t.Errorf("session ID %q: not a generated UUID: %v", c.sessionID, err)
			}
			if c.connRate != DefaultMaxConnRate || c.connBurst != DefaultMaxConnBurst || c.limiter == nil {
				t.Errorf("conn rate %v burst %d limiter %v", c.connRate, c.connBurst, c.limiter)
			}
			if c.limiter != sharedLimiter(DefaultMaxConnRate, DefaultMaxConnBurst) {
				t.Error("default limiter is not the process-wide one")
			}
			if c.redialBackoff.Min != 50*time.Millisecond || c.redialBackoff.Max != time.Second {
				t.Errorf("redial backoff %+v", c.redialBackoff)
			}
			if c.retry.MaxAttempts != 10 || c.retry.Backoff.Min != 100*time.Millisecond || c.retry.Backoff.Max != time.Second {
				t.Errorf("retry %+v", c.retry)
			}
		}},
		{"every variable", map[string]string{
			"AZKAFKA_AZ": "use1-az4", "AZKAFKA_CLIENT_ID": "billing", "AZKAFKA_SESSION_ID": sid,
			"AZKAFKA_INTERZONE_LB": "false", "AZKAFKA_MAX_CONN_RATE": "7.5", "AZKAFKA_MAX_CONN_BURST": "3",
			"AZKAFKA_REDIAL_BACKOFF_MIN": "20ms", "AZKAFKA_REDIAL_BACKOFF_MAX": "2s",
			"AZKAFKA_RETRY_MAX_ATTEMPTS": "4", "AZKAFKA_RETRY_BACKOFF_MIN": "5ms", "AZKAFKA_RETRY_BACKOFF_MAX": "50ms",
		}, nil, func(t *testing.T, c config) {
			if c.az != "use1-az4" || c.userID != "billing" || c.sessionID != sid || c.interzoneLB {
				t.Errorf("got %+v", c)
			}
			if c.connRate != 7.5 || c.connBurst != 3 || c.limiter.Limit() != 7.5 || c.limiter.Burst() != 3 {
				t.Errorf("rate %v burst %d", c.connRate, c.connBurst)
			}
			if c.redialBackoff.Min != 20*time.Millisecond || c.redialBackoff.Max != 2*time.Second {
				t.Errorf("redial %+v", c.redialBackoff)
			}
			if c.retry.MaxAttempts != 4 || c.retry.Backoff.Min != 5*time.Millisecond || c.retry.Backoff.Max != 50*time.Millisecond {
				t.Errorf("retry %+v", c.retry)
			}
		}},
		{"rate off", map[string]string{"AZKAFKA_AZ": "a", "AZKAFKA_MAX_CONN_RATE": "off"}, nil, func(t *testing.T, c config) {
			if c.limiter != nil {
				t.Error("limiter set with rate off")
			}
		}},
		{"rate 0", map[string]string{"AZKAFKA_AZ": "a", "AZKAFKA_MAX_CONN_RATE": "0"}, nil, func(t *testing.T, c config) {
			if c.limiter != nil {
				t.Error("limiter set with rate 0")
			}
		}},
		{"warpstream variable", map[string]string{"WARPSTREAM_AVAILABILITY_ZONE": "us-west-2c"}, nil, func(t *testing.T, c config) {
			if c.az != "us-west-2c" || c.azSource != "env" {
				t.Errorf("az %q source %q", c.az, c.azSource)
			}
		}},
		{"options win over env", map[string]string{
			"AZKAFKA_AZ": "env-az", "AZKAFKA_CLIENT_ID": "env-id", "AZKAFKA_SESSION_ID": sid,
			"AZKAFKA_INTERZONE_LB": "false", "AZKAFKA_MAX_CONN_RATE": "1", "AZKAFKA_RETRY_MAX_ATTEMPTS": "2",
			"AZKAFKA_REDIAL_BACKOFF_MIN": "1s",
		}, []Option{
			WithAZ("opt-az"), WithClientID("opt-id"), WithSessionID("11111111-2222-4333-8444-555555555555"),
			WithInterzoneLB(true), WithMaxConnRate(9, 2), WithRetry(6, time.Millisecond, 2*time.Millisecond),
			WithRedialBackoff(retry.Backoff{Min: time.Millisecond, Max: 3 * time.Millisecond}),
		}, func(t *testing.T, c config) {
			if c.az != "opt-az" || c.azSource != "option" || c.userID != "opt-id" ||
				c.sessionID != "11111111-2222-4333-8444-555555555555" || !c.interzoneLB {
				t.Errorf("got %+v", c)
			}
			if c.limiter.Limit() != 9 || c.limiter.Burst() != 2 || c.retry.MaxAttempts != 6 || c.redialBackoff.Min != time.Millisecond {
				t.Errorf("limits %v/%d retry %+v redial %+v", c.limiter.Limit(), c.limiter.Burst(), c.retry, c.redialBackoff)
			}
		}},
		{"private limiter", map[string]string{"AZKAFKA_AZ": "a"}, []Option{WithConnLimiter(rate.NewLimiter(1, 1))},
			func(t *testing.T, c config) {
				if c.limiter == sharedLimiter(DefaultMaxConnRate, DefaultMaxConnBurst) || c.limiter.Limit() != 1 {
					t.Error("private limiter not used")
				}
			}},
		{"no limiter at all", map[string]string{"AZKAFKA_AZ": "a"}, []Option{WithConnLimiter(nil)},
			func(t *testing.T, c config) {
				if c.limiter != nil {
					t.Error("limiter set")
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(context.Background(), append([]Option{env(tt.env), noDetect(t)}, tt.opts...))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfigInvalid(t *testing.T) {
	tests := []struct {
		env  map[string]string
		opts []Option
		want string // the error must contain it
	}{
		{env: map[string]string{"AZKAFKA_MAX_CONN_RATE": "abc"}, want: `AZKAFKA_MAX_CONN_RATE="abc": not a number`},
		{env: map[string]string{"AZKAFKA_MAX_CONN_RATE": "-1"}, want: `AZKAFKA_MAX_CONN_RATE="-1"`},
		{env: map[string]string{"AZKAFKA_MAX_CONN_RATE": "NaN"}, want: `AZKAFKA_MAX_CONN_RATE="NaN"`},
		{env: map[string]string{"AZKAFKA_MAX_CONN_RATE": "+Inf"}, want: `AZKAFKA_MAX_CONN_RATE="+Inf"`},
		{env: map[string]string{"AZKAFKA_MAX_CONN_BURST": "0"}, want: `AZKAFKA_MAX_CONN_BURST="0": must be >= 1`},
		{env: map[string]string{"AZKAFKA_MAX_CONN_BURST": "1.5"}, want: `AZKAFKA_MAX_CONN_BURST="1.5": not an integer`},
		{env: map[string]string{"AZKAFKA_INTERZONE_LB": "maybe"}, want: `AZKAFKA_INTERZONE_LB="maybe": want true or false`},
		{env: map[string]string{"AZKAFKA_SESSION_ID": "session-1"}, want: `AZKAFKA_SESSION_ID="session-1": not a UUID`},
		{env: map[string]string{"AZKAFKA_CLIENT_ID": "a,,b"}, want: `AZKAFKA_CLIENT_ID="a,,b"`},
		{env: map[string]string{"AZKAFKA_CLIENT_ID": "a=b=c"}, want: `AZKAFKA_CLIENT_ID="a=b=c"`},
		{env: map[string]string{"AZKAFKA_AZ": "us-east-1a,warpstream_az=x"}, want: `AZKAFKA_AZ="us-east-1a,warpstream_az=x"`},
		{env: map[string]string{"AZKAFKA_RETRY_MAX_ATTEMPTS": "0"}, want: `AZKAFKA_RETRY_MAX_ATTEMPTS="0": must be >= 1`},
		{env: map[string]string{"AZKAFKA_RETRY_MAX_ATTEMPTS": "ten"}, want: `AZKAFKA_RETRY_MAX_ATTEMPTS="ten": not an integer`},
		{env: map[string]string{"AZKAFKA_RETRY_BACKOFF_MIN": "100"}, want: `AZKAFKA_RETRY_BACKOFF_MIN="100": not a duration`},
		{env: map[string]string{"AZKAFKA_RETRY_BACKOFF_MAX": "-1s"}, want: `AZKAFKA_RETRY_BACKOFF_MAX="-1s": must be > 0`},
		{env: map[string]string{"AZKAFKA_RETRY_BACKOFF_MAX": "9999999h"}, want: `AZKAFKA_RETRY_BACKOFF_MAX="9999999h": a duration too long`},
		{env: map[string]string{"AZKAFKA_RETRY_BACKOFF_MIN": "2s"}, want: "AZKAFKA_RETRY_BACKOFF_MAX"},
		{env: map[string]string{"AZKAFKA_REDIAL_BACKOFF_MIN": "1h", "AZKAFKA_REDIAL_BACKOFF_MAX": "1s"}, want: "AZKAFKA_REDIAL_BACKOFF_MIN"},
		{env: map[string]string{"AZKAFKA_REDIAL_BACKOFF_MAX": "fast"}, want: `AZKAFKA_REDIAL_BACKOFF_MAX="fast"`},
		{env: map[string]string{"AZKAFKA_DETECT_TIMEOUT": "1x"}, want: `AZKAFKA_DETECT_TIMEOUT="1x"`},
		{env: map[string]string{"AZKAFKA_MAX_CONN_RATE": strings.Repeat("x", 200)}, want: `AZKAFKA_MAX_CONN_RATE="xxxxx`},
		{env: map[string]string{"AZKAFKA_AZ": "BAD,AZ"}, opts: []Option{WithAZ("good")}, want: `AZKAFKA_AZ="BAD,AZ"`},
		{env: map[string]string{"AZKAFKA_INTERZONE_LB": "nein"}, opts: []Option{WithInterzoneLB(true)}, want: `AZKAFKA_INTERZONE_LB="nein"`},
		{env: map[string]string{"AZKAFKA_CLIENT_ID": "a,,b"}, opts: []Option{WithClientID("ok")}, want: `AZKAFKA_CLIENT_ID="a,,b"`},
		{opts: []Option{WithAZ("Us East")}, want: `WithAZ("Us East")`},
		{opts: []Option{WithClientID("x\x00")}, want: "WithClientID"},
		{opts: []Option{WithSessionID("nope")}, want: `WithSessionID("nope")`},
		{opts: []Option{WithMaxConnRate(-1, 1)}, want: "WithMaxConnRate(-1, 1)"},
		{opts: []Option{WithMaxConnRate(5, 0)}, want: "burst must be >= 1"},
		{opts: []Option{WithRetry(0, time.Millisecond, time.Second)}, want: "WithRetry(0, 1ms, 1s)"},
		{opts: []Option{WithRetry(3, time.Second, time.Millisecond)}, want: "WithRetry(3, 1s, 1ms)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			opts := append([]Option{env(tt.env), noDetect(t), WithAZ("a")}, tt.opts...)
			if _, ok := tt.env["AZKAFKA_AZ"]; ok {
				opts = append([]Option{env(tt.env), noDetect(t)}, tt.opts...)
			}
			_, err := loadConfig(context.Background(), opts)
			if err == nil {
				t.Fatalf("no error, want one containing %s", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %s", err, tt.want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error is %d bytes long: the value must be truncated", len(err.Error()))
			}
		})
	}
	// A maximum that did not parse is reported once, not also as below
	// the minimum.
	_, err := loadConfig(context.Background(), []Option{env(map[string]string{"AZKAFKA_RETRY_BACKOFF_MAX": "9999999h"}), noDetect(t), WithAZ("a")})
	if err == nil || strings.Contains(err.Error(), "below min") {
		t.Errorf("error %v: want the variable's alone", err)
	}
}

func TestConfigDetector(t *testing.T) {
	calls := 0
	detect := WithDetector(func(context.Context) (azdetect.Result, error) {
		calls++
		return azdetect.Result{AZ: "eu-west-1b", Source: "ec2"}, nil
	})
	c, err := loadConfig(context.Background(), []Option{env(nil), detect})
	if err != nil {
		t.Fatal(err)
	}
	if c.az != "eu-west-1b" || c.azSource != "ec2" || calls != 1 {
		t.Fatalf("az %q source %q calls %d", c.az, c.azSource, calls)
	}
	for _, o := range []Option{WithAZ("x"), env(map[string]string{"AZKAFKA_AZ": "x"})} {
		calls = 0
		if _, err := loadConfig(context.Background(), []Option{env(nil), detect, o}); err != nil {
			t.Fatal(err)
		}
		if calls != 0 {
			t.Fatal("detection ran although the AZ was given")
		}
	}
}

func TestUnknownAZNotFatalAndLoggedOnce(t *testing.T) {
	unknownAZOnce = sync.Once{}
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	failing := WithDetector(func(context.Context) (azdetect.Result, error) {
		return azdetect.Result{}, errors.Join(azdetect.ErrNoAZ, errors.New("ec2: connection refused"))
	})
	bad := WithDetector(func(context.Context) (azdetect.Result, error) {
		return azdetect.Result{AZ: "a,b", Source: "gcp"}, nil
	})
	for i, d := range []Option{failing, failing, bad} {
		s, err := newSession(context.Background(), []Option{env(nil), d, WithLogger(logger)})
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if s.az != "" || strings.Contains(s.clientID, "warpstream_az") {
			t.Fatalf("client %d: az %q, client ID %q", i, s.az, s.clientID)
		}
		if !strings.Contains(s.clientID, "warpstream_interzone_lb=true") {
			t.Fatalf("client %d: client ID %q lost the interzone flag", i, s.clientID)
		}
	}
	if n := strings.Count(buf.String(), "availability zone unknown"); n != 1 {
		t.Fatalf("warning logged %d times, want once per process:\n%s", n, buf.String())
	}
}

func TestSessionIDPerInstance(t *testing.T) {
	a, err := newSession(context.Background(), []Option{env(nil), WithAZ("a")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSession(context.Background(), []Option{env(nil), WithAZ("a")})
	if err != nil {
		t.Fatal(err)
	}
	if a.sessionID == b.sessionID {
		t.Fatal("two client instances share a session ID")
	}
	for _, s := range []*session{a, b} {
		p, err := ParseClientID(s.clientID)
		if err != nil {
			t.Fatal(err)
		}
		if p.SessionID != s.sessionID || p.AZ != "a" || !p.InterzoneLB {
			t.Fatalf("client ID %q parts %+v", s.clientID, p)
		}
	}
	fixed, err := newSession(context.Background(), []Option{env(map[string]string{"AZKAFKA_SESSION_ID": sid}), WithAZ("a")})
	if err != nil {
		t.Fatal(err)
	}
	if fixed.sessionID != sid {
		t.Fatalf("session ID %q, want %q from the env", fixed.sessionID, sid)
	}
}

// TestREADMEListsEveryVariable: every AZKAFKA_* variable that loadConfig
// reads (its own and azdetect's) is in a row of one of the README's
// variable tables, so the two cannot drift apart.
func TestREADMEListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	read := map[string]bool{}
	_, err = loadConfig(context.Background(), []Option{WithAZ("az-a"), WithGetenv(func(name string) string {
		mu.Lock()
		defer mu.Unlock()
		read[name] = true
		return ""
	})})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| ") {
			rows = append(rows, line)
		}
	}
	n := 0
	for name := range read {
		if !strings.HasPrefix(name, "AZKAFKA_") {
			continue
		}
		n++
		if !slices.ContainsFunc(rows, func(row string) bool { return strings.Contains(row, "`"+name+"`") }) {
			t.Errorf("loadConfig reads %s, but no README table row names it", name)
		}
	}
	if n < 10 || !read[EnvIdempotence] {
		t.Fatalf("loadConfig read %d AZKAFKA_* variables (%v); the recorder missed some", n, read)
	}
	// The SDK's own variables: the table loadConfig reads is the README's,
	// defaults included.
	for _, v := range envVars {
		if row := "| `" + v.Name + "` | " + v.Default + " |"; !bytes.Contains(readme, []byte(row)) {
			t.Errorf("README lacks the row start %q", row)
		}
	}
}

// TestEnvDefaultsAreTheDefaults: setting every variable to the default its
// table row states changes nothing, so the documented defaults are the
// real ones.
func TestEnvDefaultsAreTheDefaults(t *testing.T) {
	defaults := settingstest.Defaults(envVars)
	if len(defaults) < 8 {
		t.Fatalf("only %d variables have a literal default", len(defaults))
	}
	plain, err := loadConfig(context.Background(), []Option{env(nil), WithAZ("a")})
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := loadConfig(context.Background(), []Option{env(defaults), WithAZ("a")})
	if err != nil {
		t.Fatal(err)
	}
	type knobs struct {
		lb                   bool
		rate                 float64
		burst                int
		redialMin, redialMax time.Duration
		attempts             int
		retryMin, retryMax   time.Duration
		idem                 idempotenceMode
	}
	k := func(c config) knobs {
		return knobs{c.interzoneLB, c.connRate, c.connBurst, c.redialBackoff.Min, c.redialBackoff.Max,
			c.retry.MaxAttempts, c.retry.Backoff.Min, c.retry.Backoff.Max, c.idempotence.mode}
	}
	if k(plain) != k(explicit) {
		t.Fatalf("defaults %+v, with the documented defaults set %+v (%v)", k(plain), k(explicit), defaults)
	}
}

// TestCheckEnvKnowsEveryTable: CheckEnv calls none of the variables of
// the SDK's, azdetect's, iq's or the command's tables unknown.
func TestCheckEnvKnowsEveryTable(t *testing.T) {
	var environ []string
	for _, v := range envVars {
		environ = append(environ, v.Name+"=x")
	}
	for _, name := range slices.Concat(azdetectNames(), envcheck.IQ, envcheck.CLI) {
		environ = append(environ, name+"=x")
	}
	if len(environ) < 25 {
		t.Fatalf("only %d variables", len(environ))
	}
	if errs := CheckEnv(environ); len(errs) != 0 {
		t.Errorf("known variables called unknown: %v", errs)
	}
}

func TestStrictValues(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // in the error; "" for none
	}{
		{map[string]string{EnvInterzoneLB: "TRUE"}, ""},
		{map[string]string{EnvInterzoneLB: "False"}, ""},
		{map[string]string{EnvInterzoneLB: "1"}, `AZKAFKA_INTERZONE_LB="1": want true or false`},
		{map[string]string{EnvRackAware: "t"}, `AZKAFKA_RACK_AWARE_PARTITIONING="t": want true or false`},
		{map[string]string{EnvRackAware: "yes"}, "want true or false"},
		{map[string]string{EnvIdempotence: "  "}, "sdk: AZKAFKA_IDEMPOTENCE is set but blank"},
		{map[string]string{EnvAZ: " "}, "azdetect: AZKAFKA_AZ is set but blank"},
		{map[string]string{EnvGroupProtocol: "CONSUMER"}, ""},
		{map[string]string{EnvFetchFromFollower: "Auto"}, ""},
		{map[string]string{EnvIdempotence: "FALSE"}, ""},
		{map[string]string{EnvIdempotence: "1"}, `AZKAFKA_IDEMPOTENCE="1": want auto, true or false (any case)`},
		{map[string]string{EnvIdempotence: "off"}, `AZKAFKA_IDEMPOTENCE="off": want auto, true or false (any case)`},
		{map[string]string{EnvFetchFromFollower: "on"}, `AZKAFKA_FETCH_FROM_FOLLOWER="on": want auto, true or false (any case)`},
	} {
		opts := []Option{WithAZ("az-a"), WithGetenv(func(k string) string { return tc.env[k] }), WithDetector(nil)}
		_, err := loadConfig(context.Background(), opts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: err = %v, want %q", tc.env, err, tc.want)
		}
	}
}

func TestCheckEnvNamesTheClosest(t *testing.T) {
	errs := CheckEnv([]string{"AZKAFKA_IDEMPOTANCE=false", "AZKAFKA_AZ=x", "HOME=/", "AZKAFKA_NOPE_AT_ALL_REALLY=1"})
	if len(errs) != 2 ||
		errs[0].Error() != "sdk: AZKAFKA_IDEMPOTANCE: unknown variable; did you mean AZKAFKA_IDEMPOTENCE?" ||
		errs[1].Error() != "sdk: AZKAFKA_NOPE_AT_ALL_REALLY: unknown variable" {
		t.Errorf("CheckEnv = %v", errs)
	}
}

// TestBlankVariableInTheEnvironment: with the process environment (no
// WithGetenv), a variable set to "" is an error too.
func TestBlankVariableInTheEnvironment(t *testing.T) {
	t.Setenv(EnvMaxConnBurst, "")
	if _, err := loadConfig(context.Background(), []Option{WithAZ("az-a")}); err == nil || !strings.Contains(err.Error(), "AZKAFKA_MAX_CONN_BURST is set but blank") {
		t.Errorf("err = %v", err)
	}
}

// TestOptionsOfOtherConstructorsAreRefused: a Writer-only option given to
// NewReader, NewAZAwareDialer or NewTransport is an error naming it, not
// silently ignored; and the other way round.
func TestOptionsOfOtherConstructorsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		c    ctor
		opt  Option
		want string
	}{
		{ctorReader, WithIdempotence(true), "sdk: NewReader: WithIdempotence is an option of NewWriter only"},
		{ctorReader, WithRackAwarePartitioning(true), "sdk: NewReader: WithRackAwarePartitioning is an option of NewWriter only"},
		{ctorDialer, WithIdempotence(false), "sdk: NewAZAwareDialer: WithIdempotence is an option of NewWriter only"},
		{ctorWriter, WithFetchFromFollower(true), "sdk: NewWriter: WithFetchFromFollower is an option of NewReader only"},
		{ctorTransport, WithGroupProtocol(GroupProtocolConsumer), "sdk: NewTransport: WithGroupProtocol is an option of NewReader and NewProcessor"},
		{ctorReader, WithTransactionalID("a"), "sdk: NewReader: WithTransactionalID is an option of NewTxnWriter and NewProcessor"},
		{ctorTxnWriter, WithFetchFromFollower(true), "sdk: NewTxnWriter: WithFetchFromFollower is an option of NewReader only"},
		{ctorProcessor, WithTransactionTimeout(time.Minute), ""},
		{ctorTransport, WithEngineHooks(), "sdk: NewTransport: WithEngineHooks is an option of NewWriter and NewReader"},
		{ctorReader, WithEngineHooks(), ""},
		{ctorWriter, WithIdempotence(true), ""},
		{ctorReader, WithFetchFromFollower(false), ""},
		{anyCtor, WithIdempotence(true), ""},
	} {
		_, err := loadConfig(context.Background(), []Option{forCtor(tc.c), WithAZ("a"), WithGetenv(func(string) string { return "" }), tc.opt})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%v: err = %v, want %q", tc.c, err, tc.want)
		}
	}
}

var updateREADME = flag.Bool("update", false, "rewrite the README's rows of the SDK's variables from envVars")

// TestREADMEConfigTable: the README's rows of the SDK's variables are
// generated from envVars (variable, default from the Default* constant,
// description), in its order; `go test ./sdk -run TestREADMEConfigTable
// -update` rewrites them.
func TestREADMEConfigTable(t *testing.T) {
	settingstest.CheckREADME(t, "../README.md", settings.Rows(envVars), *updateREADME, "go test ./sdk -run TestREADMEConfigTable -update")
}

// TestOptionsNameTheirVariables: the doc of each variable's option names
// the variable, so that the option docs and the table agree on which
// option wins over which variable.
func TestOptionsNameTheirVariables(t *testing.T) {
	settingstest.CheckOptionDocs(t, []string{"config.go", "metrics.go"}, envVars)
}

// azdetectNames returns the names of azdetect's own variables.
func azdetectNames() []string {
	var names []string
	for _, e := range settings.Entries() {
		if e.Package == "azdetect" && !e.Foreign {
			names = append(names, e.Name)
		}
	}
	return names
}

// TestEveryProblemIsReported: a configuration with several problems (bad
// variables, a bad option, an option the constructor does not take, a
// backoff whose max is below its min) is refused with all of them, one per
// line under the constructor's prefix, not with the first only.
func TestEveryProblemIsReported(t *testing.T) {
	env := map[string]string{EnvMaxConnRate: "fast", EnvRetryMaxAttempts: "0", "AZKAFKA_DETECT_TIMEOUT": "1x",
		EnvRedialBackoffMin: "2s", EnvRedialBackoffMax: "1s"}
	_, err := NewReader(kafka.ReaderConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "t"},
		WithGetenv(func(k string) string { return env[k] }), WithAZ("a"),
		WithIdempotence(true), WithMaxResponseBytes(10), WithSessionID("nope"))
	if err == nil {
		t.Fatal("NewReader accepted the configuration")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, want := range []string{
		`sdk: NewReader: AZKAFKA_MAX_CONN_RATE="fast": not a number`,
		`sdk: NewReader: AZKAFKA_RETRY_MAX_ATTEMPTS="0": must be >= 1`,
		`sdk: NewReader: AZKAFKA_DETECT_TIMEOUT="1x"`,
		`sdk: NewReader: WithIdempotence is an option of NewWriter only`,
		`sdk: NewReader: WithMaxResponseBytes(10): want at least 65536`,
		`sdk: NewReader: WithSessionID("nope")`,
		`sdk: NewReader: re-dial backoff max 1s is below min 2s`,
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no line starts with %q in:\n%v", want, err)
		}
	}
	if len(lines) != 7 {
		t.Errorf("%d lines, want 7:\n%v", len(lines), err)
	}
}

// The Writer's metadata grows as old as kafka-go's would: its
// Transport's MetadataTTL, or kafka-go's 6 s, not the engine's 5
// minutes, so that partitions added to a topic are written to as soon.
func TestWriterMetadataTTL(t *testing.T) {
	for _, tc := range []struct {
		transport *kafka.Transport
		want      time.Duration
	}{
		{nil, 6 * time.Second},
		{&kafka.Transport{}, 6 * time.Second},
		{&kafka.Transport{MetadataTTL: 2 * time.Second}, 2 * time.Second},
		{&kafka.Transport{MetadataTTL: time.Millisecond}, metadataMinAge},
		{&kafka.Transport{MetadataTTL: 24 * time.Hour}, time.Hour},
	} {
		kw := &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: "t"}
		if tc.transport != nil {
			kw.Transport = tc.transport
		}
		w, err := NewWriter(kw, WithAZ("az-a"), WithGetenv(func(string) string { return "" }))
		if err != nil {
			t.Fatal(err)
		}
		if got := w.metadataTTL(); got != tc.want {
			t.Errorf("Transport %+v: metadata TTL %v, want %v", tc.transport, got, tc.want)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeliveryBudget: attempts × (WriteTimeout + the longest backoff), at
// least a second; a retry count so large that the product overflows is a
// budget without end in practice (it was a second), and its deadline is
// still ahead.
func TestDeliveryBudget(t *testing.T) {
	for _, c := range []struct {
		attempts         int
		timeout, backoff time.Duration
		want             time.Duration
	}{
		{10, 10 * time.Second, time.Second, 110 * time.Second},
		{1, time.Millisecond, 0, time.Second},
		{0, 10 * time.Second, 0, 10 * time.Second},
		{1_000_000_000, 10 * time.Second, time.Second, maxDeliveryBudget},
		{math.MaxInt, time.Nanosecond, 0, maxDeliveryBudget},
	} {
		if got := deliveryBudget(c.attempts, c.timeout, c.backoff); got != c.want {
			t.Errorf("deliveryBudget(%d, %v, %v) = %v, want %v", c.attempts, c.timeout, c.backoff, got, c.want)
		}
	}
	b := &budgetClock{budget: maxDeliveryBudget}
	defer b.stop()
	if d, ok := b.ctx(time.Now()).Deadline(); !ok || !d.After(time.Now().Add(50*365*24*time.Hour)) {
		t.Errorf("the longest budget's deadline is %v", d)
	}
}
