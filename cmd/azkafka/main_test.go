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
