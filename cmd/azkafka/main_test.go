package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args       []string
		wantStatus int
		wantOut    string // substring of stdout
		wantErr    string // substring of stderr
	}{
		{args: nil, wantStatus: exitUsage, wantErr: "Usage: azkafka"},
		{args: []string{"help"}, wantStatus: exitOK, wantOut: "version"},
		{args: []string{"--help"}, wantStatus: exitOK, wantOut: "Commands:"},
		{args: []string{"help", "version"}, wantStatus: exitOK, wantOut: "Usage: azkafka version"},
		{args: []string{"version"}, wantStatus: exitOK, wantOut: "azkafka "},
		{args: []string{"version", "extra"}, wantStatus: exitUsage, wantErr: `unexpected argument "extra"`},
		{args: []string{"nosuch"}, wantStatus: exitUsage, wantErr: `unknown command "nosuch"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			var out, errOut bytes.Buffer
			got := run(tt.args, strings.NewReader(""), &out, &errOut)
			if got != tt.wantStatus {
				t.Errorf("status = %d, want %d (stderr %q)", got, tt.wantStatus, errOut.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", out.String(), tt.wantOut)
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tt.wantErr)
			}
		})
	}
}

// TestBadUsageIsOneLine: a bad or misspelled flag, command or argument
// prints its error in one line and where the help is, never the whole
// usage, and exits 2; a near miss names the flag or command meant.
func TestBadUsageIsOneLine(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string // the first line, whole
		help    string // the second line names "azkafka <help> --help"
	}{
		{[]string{"nosuch"}, `azkafka: unknown command "nosuch"`, ""},
		{[]string{"diagnos"}, `azkafka: unknown command "diagnos" (did you mean diagnose?)`, ""},
		{[]string{"--json"}, `azkafka: unknown flag "--json": flags follow the command (azkafka <command> [flags])`, ""},
		{[]string{"version", "extra"}, `azkafka version: unexpected argument "extra"`, "version"},
		{[]string{"detect", "--yaml"}, "azkafka detect: flag provided but not defined: -yaml", "detect"},
		{[]string{"detect", "--jsno"}, "azkafka detect: flag provided but not defined: -jsno (did you mean --json?)", "detect"},
		{[]string{"detect", "now"}, `azkafka detect: unexpected argument "now"`, "detect"},
		{[]string{"clientid", "--ack", "one"}, "azkafka clientid: flag provided but not defined: -ack (did you mean --acks?)", "clientid"},
		{[]string{"clientid", "--acks", "two"}, `azkafka clientid: --acks="two": want all, one or none`, "clientid"},
		{[]string{"diagnose", "--topc", "x"}, "azkafka diagnose: flag provided but not defined: -topc (did you mean --topic?)", "diagnose"},
		{[]string{"diagnose", "--timeout", "soon"}, `azkafka diagnose: invalid value "soon" for flag -timeout: parse error`, "diagnose"},
		{[]string{"diagnose"}, "azkafka diagnose: --bootstrap is required, e.g. --bootstrap broker-1:9092", "diagnose"},
		{[]string{"partition", "--partitons", "3"}, "azkafka partition: flag provided but not defined: -partitons (did you mean --partitions?)", "partition"},
		{[]string{"partition", "--partitions", "x", "k"}, `azkafka partition: --partitions "x": "x" is not a partition count in 1..65536`, "partition"},
		{[]string{"partition", "--xyzzy"}, "azkafka partition: flag provided but not defined: -xyzzy", "partition"},
		{[]string{"iq"}, "azkafka iq: want a subcommand: route or describe", "iq"},
		{[]string{"iq", "frob"}, `azkafka iq: unknown subcommand "frob" (want route or describe)`, "iq"},
		{[]string{"iq", "route", "--stor", "s", "k"}, "azkafka iq route: flag provided but not defined: -stor (did you mean --store?)", "iq"},
		{[]string{"iq", "describe", "--bootstrp", "h:1"}, "azkafka iq describe: flag provided but not defined: -bootstrp (did you mean --bootstrap?)", "iq"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(tt.args, strings.NewReader(""), &out, &errOut); got != exitUsage {
				t.Errorf("status = %d, want %d", got, exitUsage)
			}
			see := "see azkafka --help"
			if tt.help != "" {
				see = "see azkafka " + tt.help + " --help"
			}
			if want := tt.wantErr + "\n" + see + "\n"; errOut.String() != want {
				t.Errorf("stderr =\n%s\nwant\n%s", errOut.String(), want)
			}
			if out.Len() > 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
		})
	}
}

func TestClosest(t *testing.T) {
	names := []string{"bootstrap", "json", "topic", "timeout", "tls"}
	for _, tc := range []struct{ in, want string }{
		{"topc", "topic"}, {"jsno", "json"}, {"bootstrp", "bootstrap"}, {"tl", ""},
		{"tsl", "tls"}, {"xyzzy", ""}, {"", ""}, {"timeou", "timeout"}, {"json", "json"},
	} {
		if got := closest(tc.in, names); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
