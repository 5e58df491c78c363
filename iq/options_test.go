package iq

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestOptionsApplyWhereTheySay checks every option against every
// constructor: taken where its doc says, refused by the others with an
// error naming it and the constructors that take it.
func TestOptionsApplyWhereTheySay(t *testing.T) {
	snap, _ := newSnapshot(threeHosts())
	constructors := []struct {
		name string
		new  func(opts ...Option) (func() error, error)
	}{
		{"NewClient", func(opts ...Option) (func() error, error) {
			_, err := NewClient(sourceOf(snap), opts...)
			return func() error { return nil }, err
		}},
		{"NewClusterSource", func(opts ...Option) (func() error, error) {
			s, err := NewClusterSource([]string{"127.0.0.1:9092"}, "app", opts...)
			if err != nil {
				return nil, err
			}
			return s.Close, nil
		}},
		{"NewHTTPSource", func(opts ...Option) (func() error, error) {
			s, err := NewHTTPSource([]string{"http://127.0.0.1:1/m"}, opts...)
			if err != nil {
				return nil, err
			}
			return s.Close, nil
		}},
	}
	all := []string{"NewClient", "NewClusterSource", "NewHTTPSource"}
	sources := []string{"NewClusterSource", "NewHTTPSource"}
	for _, o := range []struct {
		name  string
		opt   Option
		takes []string
	}{
		{"WithLogger", WithLogger(slog.New(slog.DiscardHandler)), all},
		{"WithLookupEnv", WithLookupEnv(noEnv), all},
		{"WithPollInterval", WithPollInterval(time.Second), sources},
		{"WithPollTimeout", WithPollTimeout(time.Second), sources},
		{"WithAllowStandby", WithAllowStandby(true), []string{"NewClient"}},
		{"WithMaxLag", WithMaxLag(1), []string{"NewClient"}},
		{"WithAZ", WithAZ("az1"), []string{"NewClient"}},
		{"WithPartitioner", WithPartitioner(func(string, []byte, int) int { return 0 }), []string{"NewClient"}},
		{"WithMaxAttempts", WithMaxAttempts(1), []string{"NewClient"}},
		{"WithAttemptTimeout", WithAttemptTimeout(time.Second), []string{"NewClient"}},
		{"WithTransport", WithTransport(&kafka.Transport{}), []string{"NewClusterSource"}},
		{"WithStoreTopics", WithStoreTopics("s", "t"), []string{"NewClusterSource"}},
		{"WithAZTag", WithAZTag("zone"), []string{"NewClusterSource"}},
		{"WithMaxBodyBytes", WithMaxBodyBytes(1024), []string{"NewHTTPSource"}},
		{"WithHTTPClient", WithHTTPClient(&http.Client{}), []string{"NewHTTPSource"}},
	} {
		for _, c := range constructors {
			closeFn, err := c.new(WithLookupEnv(noEnv), o.opt)
			takes := false
			for _, n := range o.takes {
				takes = takes || n == c.name
			}
			if takes {
				if err != nil {
					t.Errorf("%s(%s): %v", c.name, o.name, err)
				} else if err := closeFn(); err != nil {
					t.Errorf("%s(%s): Close: %v", c.name, o.name, err)
				}
				continue
			}
			want := "iq: " + c.name + ": " + o.name + " is an option of " + strings.Join(o.takes, " and ")
			if len(o.takes) == 1 {
				want += " only"
			}
			if err == nil || err.Error() != want {
				t.Errorf("%s(%s): got %v, want %q", c.name, o.name, err, want)
			}
		}
	}
	if _, err := NewClient(sourceOf(snap), WithAZ("az1"), nil); err == nil || err.Error() != "iq: NewClient: option 1 is nil" {
		t.Errorf("nil option: %v", err)
	}
}

// TestEnvThroughLookup checks that each constructor reads its variables
// through WithLookupEnv and refuses a blank one.
func TestEnvThroughLookup(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{envAZTag: ""}, "iq: AZKAFKA_IQ_AZ_TAG is set but blank: unset it or give it a value"},
		{map[string]string{envAZTag: "\t"}, "iq: AZKAFKA_IQ_AZ_TAG is set but blank: unset it or give it a value"},
		{map[string]string{"AZKAFKA_MAX_RESPONSE_BYTES": " "}, "iq: AZKAFKA_MAX_RESPONSE_BYTES is set but blank: unset it or give it a value"},
		{map[string]string{"AZKAFKA_MAX_RESPONSE_BYTES": "12"}, `iq: AZKAFKA_MAX_RESPONSE_BYTES="12": want at least 65536`},
	} {
		_, err := NewClusterSource([]string{"127.0.0.1:9092"}, "app", WithLookupEnv(envMap(c.env)))
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: got %v, want %q", c.env, err, c.want)
		}
	}
	// A broken variable is reported also when an option overrides it.
	_, err := NewClusterSource([]string{"127.0.0.1:9092"}, "app", WithLookupEnv(envMap(map[string]string{envAZTag: ""})), WithAZTag("zone"))
	if err == nil || err.Error() != "iq: AZKAFKA_IQ_AZ_TAG is set but blank: unset it or give it a value" {
		t.Fatalf("WithAZTag over a blank variable: %v", err)
	}
	s, err := NewClusterSource([]string{"127.0.0.1:9092"}, "app", WithLookupEnv(envMap(map[string]string{envAZTag: "env-zone"})), WithAZTag("zone"))
	if err != nil || clusterOf(s).azTag != "zone" {
		t.Fatalf("WithAZTag over a variable: %v", err)
	}
	s.Close()
	s, err = NewClusterSource([]string{"127.0.0.1:9092"}, "app", WithLookupEnv(envMap(map[string]string{envAZTag: " zone ", "AZKAFKA_MAX_RESPONSE_BYTES": "65536"})))
	if err != nil || clusterOf(s).azTag != "zone" || clusterOf(s).maxResponse != 65536 {
		t.Fatalf("from the lookup: %v", err)
	}
	s.Close()
	// A lookup that knows nothing leaves the defaults, whatever the
	// process environment says.
	t.Setenv(envAZTag, "from-process")
	s, err = NewClusterSource([]string{"127.0.0.1:9092"}, "app", WithLookupEnv(noEnv))
	if err != nil || clusterOf(s).azTag != defaultAZTag || clusterOf(s).maxResponse != 0 {
		t.Fatalf("empty lookup: %v, tag %q", err, clusterOf(s).azTag)
	}
	s.Close()
}
