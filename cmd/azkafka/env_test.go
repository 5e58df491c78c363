package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/azkafka/azkafka/internal/envcheck"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/internal/settings/settingstest"
)

// withEnv makes `azkafka env` see only env.
func withEnv(t *testing.T, env map[string]string) {
	t.Helper()
	oldLookup, oldEnviron := envLookup, envEnviron
	t.Cleanup(func() { envLookup, envEnviron = oldLookup, oldEnviron })
	envLookup = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	envEnviron = func() []string {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		return kv
	}
}

func TestEnvCommand(t *testing.T) {
	withEnv(t, map[string]string{
		"AZKAFKA_AZ":            "us-east-1a",
		"AZKAFKA_IQ_MAX_LAG":    "abc",
		"AZKAFKA_MAX_CONN_RATE": " ",
		"AZKAFKA_IDEMPOTANCE":   "true",
		"AZKAFKA_SASL_PASSWORD": "s3cret",
		"NODE_NAME":             " ",
	})
	var out, errb bytes.Buffer
	if code := run([]string{"env", "--json"}, nil, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
	}
	var got []envOutput
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	by := map[string]envOutput{}
	var order []string
	for _, o := range got {
		by[o.Variable] = o
		order = append(order, o.Package)
	}
	// Every registered variable is listed once, the packages in the
	// README's order.
	if n := len(settings.Entries()); len(got) != n {
		t.Errorf("%d variables listed, %d registered", len(got), n)
	}
	if strings.Join(order[:3], ",") != "azdetect,azdetect,azdetect" || by["AZKAFKA_MAX_RESPONSE_BYTES"].Package != "sdk" {
		t.Errorf("order %v; AZKAFKA_MAX_RESPONSE_BYTES under %q", order, by["AZKAFKA_MAX_RESPONSE_BYTES"].Package)
	}
	for name, want := range map[string]envOutput{
		"AZKAFKA_AZ":               {Source: "env", Value: "us-east-1a"},
		"AZKAFKA_IQ_ALLOW_STANDBY": {Source: "default", Value: "false"},
		"AZKAFKA_IQ_MAX_LAG":       {Source: "env", Value: "abc", Error: "not a non-negative integer"},
		"AZKAFKA_MAX_CONN_RATE":    {Source: "env", Value: " ", Error: "set but blank: unset it or give it a value"},
		"AZKAFKA_SASL_PASSWORD":    {Source: "env", Value: "(set)"},
		"NODE_NAME":                {Source: "default", Value: ""}, // a platform's blank is unset
	} {
		g := by[name]
		if g.Source != want.Source || g.Value != want.Value || g.Error != want.Error {
			t.Errorf("%s: %+v, want source %q value %q error %q", name, g, want.Source, want.Value, want.Error)
		}
	}
	for _, want := range []string{
		`azkafka env: iq: AZKAFKA_IQ_MAX_LAG="abc": not a non-negative integer`,
		"azkafka env: sdk: AZKAFKA_IDEMPOTANCE: unknown variable; did you mean AZKAFKA_IDEMPOTENCE?",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if strings.Contains(out.String()+errb.String(), "s3cret") {
		t.Error("the SASL password is printed")
	}

	withEnv(t, map[string]string{"AZKAFKA_AZ_FORMAT": "ID"})
	out.Reset()
	errb.Reset()
	if code := run([]string{"env"}, nil, &out, &errb); code != exitOK || errb.Len() != 0 {
		t.Fatalf("a valid environment: exit %d, stderr %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "AZKAFKA_AZ_FORMAT") || !strings.Contains(out.String(), "env      ID") {
		t.Errorf("table:\n%s", out.String())
	}
}

var updateREADME = flag.Bool("update", false, "rewrite the README's row of the command's variable from cliVars")

// TestREADMEConfigTable: the README's row of the command's own variable
// is generated from cliVars; `go test ./cmd/azkafka -run
// TestREADMEConfigTable -update` rewrites it.
func TestREADMEConfigTable(t *testing.T) {
	settingstest.CheckREADME(t, "../../README.md", settings.Rows(cliVars), *updateREADME, "go test ./cmd/azkafka -run TestREADMEConfigTable -update")
}

// TestEnvcheckListsTheCommandsVariable: the command's variable is known
// to the unknown-variable check of programs that do not link the command.
func TestEnvcheckListsTheCommandsVariable(t *testing.T) {
	var names []string
	for _, v := range cliVars {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, envcheck.CLI) {
		t.Errorf("cliVars %v, envcheck.CLI %v", names, envcheck.CLI)
	}
}
