package azdetect

import (
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/envcheck"
)

// TestEnvcheckKnowsAzdetectsVariables: every AZKAFKA_* variable azdetect
// reads is known, so that azkafka does not call it misspelled.
func TestEnvcheckKnowsAzdetectsVariables(t *testing.T) {
	var environ []string
	for _, v := range envVars {
		if strings.HasPrefix(v.Name, envcheck.Prefix) {
			environ = append(environ, v.Name+"=x")
		}
	}
	if u := envcheck.Check(environ); len(environ) < 7 || len(u) != 0 {
		t.Errorf("%d variables; called unknown: %v", len(environ), u)
	}
}

func TestAZFormatIsCaseInsensitive(t *testing.T) {
	cfg, err := ConfigFromEnv(func(k string) string {
		if k == EnvAZFormat {
			return "ID"
		}
		return ""
	})
	if err != nil || cfg.Format != FormatID {
		t.Errorf("AZKAFKA_AZ_FORMAT=ID: %+v, %v", cfg.Format, err)
	}
}

func TestProvidersAreCaseInsensitive(t *testing.T) {
	cfg, err := ConfigFromEnv(func(k string) string {
		if k == EnvDetectProviders {
			return "EC2, Kubernetes"
		}
		return ""
	})
	if err != nil || strings.Join(cfg.Providers, ",") != "ec2,kubernetes" {
		t.Errorf("AZKAFKA_DETECT_PROVIDERS=\"EC2, Kubernetes\": %v, %v", cfg.Providers, err)
	}
}
