package azdetect

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnv(t *testing.T) {
	t.Run("every variable", func(t *testing.T) {
		cfg, err := ConfigFromEnv(envOf(map[string]string{
			EnvAZ:                " us-east-1a ",
			EnvWarpStreamAZ:      "us-east-1b",
			EnvAZFormat:          "id",
			EnvDetectProviders:   " ec2 , kubernetes,",
			EnvDetectTimeout:     "250ms",
			EnvECSMetadataURI:    "http://169.254.170.2/v4/abc",
			EnvEC2Endpoint:       "http://[fd00:ec2::254]",
			EnvEC2Disabled:       "TRUE",
			EnvGCEMetadataHost:   "metadata.google.internal:8080",
			EnvAzureEndpoint:     "http://169.254.169.254",
			EnvKubernetesHost:    "10.96.0.1",
			EnvKubernetesPort:    "6443",
			EnvNodeName:          "ip-10-0-1-17.ec2.internal",
			EnvKubernetesToken:   "/tmp/token",
			EnvKubernetesCA:      "/tmp/ca.crt",
			"UNRELATED_VARIABLE": "x",
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := Config{
			EnvAZ: "us-east-1a", EnvAZVariable: EnvAZ, Format: FormatID,
			Providers: []string{SourceEC2, SourceKubernetes}, Timeout: 250 * time.Millisecond,
			ECSMetadataURI: "http://169.254.170.2/v4/abc", EC2Endpoint: "http://[fd00:ec2::254]", EC2Disabled: true,
			GCPHost: "metadata.google.internal:8080", AzureEndpoint: "http://169.254.169.254",
			KubernetesHost: "10.96.0.1", KubernetesPort: "6443", NodeName: "ip-10-0-1-17.ec2.internal",
			KubernetesTokenFile: "/tmp/token", KubernetesCAFile: "/tmp/ca.crt",
		}
		if !reflect.DeepEqual(cfg, want) {
			t.Fatalf("got  %+v\nwant %+v", cfg, want)
		}
	})
	t.Run("empty environment", func(t *testing.T) {
		cfg, err := ConfigFromEnv(envOf(nil))
		if err != nil || !reflect.DeepEqual(cfg, Config{}) {
			t.Fatalf("got %+v, %v; want the zero Config", cfg, err)
		}
	})
	t.Run("warpstream variable", func(t *testing.T) {
		cfg, err := ConfigFromEnv(envOf(map[string]string{EnvWarpStreamAZ: "eu-west-1a"}))
		if err != nil || cfg.EnvAZ != "eu-west-1a" || cfg.EnvAZVariable != EnvWarpStreamAZ {
			t.Fatalf("got %+v, %v", cfg, err)
		}
	})
	t.Run("blank is an error, not unset", func(t *testing.T) {
		_, err := ConfigFromEnv(envOf(map[string]string{EnvAZ: "  ", EnvWarpStreamAZ: "eu-west-1a"}))
		if err == nil || err.Error() != "azdetect: AZKAFKA_AZ is set but blank: unset it or give it a value" {
			t.Fatalf("AZKAFKA_AZ blank: err = %v", err)
		}
		// A platform's own variable set to blanks is unset, as its owner reads it.
		cfg, err := ConfigFromEnv(envOf(map[string]string{EnvWarpStreamAZ: " ", EnvNodeName: " "}))
		if err != nil || cfg.EnvAZ != "" || cfg.NodeName != "" {
			t.Fatalf("WARPSTREAM_AVAILABILITY_ZONE and NODE_NAME blank: %+v, %v", cfg, err)
		}
	})
	t.Run("ipv6 endpoint mode", func(t *testing.T) {
		cfg, err := ConfigFromEnv(envOf(map[string]string{EnvEC2EndpointMode: "IPv6"}))
		if err != nil || cfg.EC2Endpoint != "http://[fd00:ec2::254]" {
			t.Fatalf("got %+v, %v", cfg, err)
		}
	})
	t.Run("disabled only for true", func(t *testing.T) {
		cfg, err := ConfigFromEnv(envOf(map[string]string{EnvEC2Disabled: "1"}))
		if err != nil || cfg.EC2Disabled {
			t.Fatalf("got %+v, %v; the AWS SDK disables IMDS only for \"true\"", cfg, err)
		}
	})
}

func TestConfigFromEnvErrors(t *testing.T) {
	tests := []struct {
		name, value string
		want        string // substring of the error
	}{
		{EnvAZ, "us-east-1a,warpstream_interzone_lb=false",
			`azdetect: AZKAFKA_AZ="us-east-1a,warpstream_interzone_lb=false": invalid AZ: byte "," at offset 10`},
		{EnvWarpStreamAZ, "Zone A", `azdetect: WARPSTREAM_AVAILABILITY_ZONE="Zone A": invalid AZ`},
		{EnvAZ, strings.Repeat("a", 200), `AZKAFKA_AZ="` + strings.Repeat("a", 64) + `"...(200 bytes): invalid AZ: 200 bytes, longer than 128`},
		{EnvAZFormat, "zone-id", `AZKAFKA_AZ_FORMAT="zone-id": want "name" or "id" (any case)`},
		{EnvDetectProviders, "env,aws", `AZKAFKA_DETECT_PROVIDERS="env,aws": unknown provider "aws"`},
		{EnvDetectProviders, " , ", `AZKAFKA_DETECT_PROVIDERS=" , ": names no provider`},
		{EnvDetectTimeout, "1", `AZKAFKA_DETECT_TIMEOUT="1": not a Go duration`},
		{EnvDetectTimeout, "-1s", `AZKAFKA_DETECT_TIMEOUT="-1s": must be > 0`},
		{EnvDetectTimeout, "2h", `AZKAFKA_DETECT_TIMEOUT="2h": must be > 0 and <= 1m0s`},
		{EnvECSMetadataURI, "169.254.170.2/v4", `ECS_CONTAINER_METADATA_URI_V4="169.254.170.2/v4": not an http:// or https:// URL`},
		{EnvEC2Endpoint, "ftp://x", `AWS_EC2_METADATA_SERVICE_ENDPOINT="ftp://x": not an http`},
		{EnvEC2EndpointMode, "IPv5", `AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE="IPv5"`},
		{EnvGCEMetadataHost, "http://metadata", `GCE_METADATA_HOST="http://metadata": want host or host:port`},
		{EnvAzureEndpoint, "::", `AZKAFKA_AZURE_IMDS_ENDPOINT="::": not an http`},
		{EnvKubernetesPort, "https", `KUBERNETES_SERVICE_PORT="https": not a TCP port number`},
		{EnvKubernetesPort, "70000", `KUBERNETES_SERVICE_PORT="70000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := ConfigFromEnv(envOf(map[string]string{tt.name: tt.value}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
	t.Run("all errors at once", func(t *testing.T) {
		_, err := ConfigFromEnv(envOf(map[string]string{EnvAZFormat: "x", EnvDetectTimeout: "y"}))
		if err == nil || !strings.Contains(err.Error(), EnvAZFormat) || !strings.Contains(err.Error(), EnvDetectTimeout) {
			t.Fatalf("err = %v, want both variables named", err)
		}
	})
}

// Explicit Config fields are checked by Detect.
func TestConfigCheck(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Format: "names"}, `Config.Format "names"`},
		{Config{Providers: []string{"ec2", "k8s"}}, `unknown provider "k8s"`},
		{Config{Timeout: time.Hour}, "Config.Timeout 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			tt.cfg.DialContext = loopbackDial(t, nil)
			_, err := New(tt.cfg).Detect(context.Background())
			var de *DetectError
			if !errors.As(err, &de) || de.Config == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a config DetectError containing %q", err, tt.want)
			}
		})
	}
}
