// Command azkafka is the operator's tool for azkafka: it shows which
// availability zone a process would detect, the client ID it would send,
// how a cluster's brokers and partition leaders sit relative to the
// client's zone, where keys land on partitions, and how interactive
// queries are routed.
//
//	azkafka help
//	azkafka version
package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
)

// Exit statuses shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran but found nothing / the operation failed
	exitUsage = 2 // bad flags, arguments or configuration
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the process exit status.
type command struct {
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands lists every subcommand; each lives in a file of its own name.
var commands = map[string]command{
	"clientid":  {"print the Kafka client ID this process would send", runClientID},
	"detect":    {"show the availability zone this process would detect", runDetect},
	"diagnose":  {"connect to a cluster and show brokers, racks, in-zone leaders, round trips and what the SDK would do", runDiagnose},
	"env":       {"list every setting read from the environment, its value and source, and check them", runEnv},
	"iq":        {"route interactive queries: which Kafka Streams instance holds a key", runIQ},
	"migrate":   {"move Go packages from kafka-go's Writer and Reader to the SDK's", runMigrate},
	"partition": {"show where keys land on partitions and what moves when a topic grows", runPartition},
	"version":   {"print the azkafka version", runVersion},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run([]string{"-h"}, stdin, stdout, stderr)
			}
		}
		usage(stdout)
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		msg := fmt.Sprintf("unknown command %q", name)
		if strings.HasPrefix(name, "-") {
			msg = fmt.Sprintf("unknown flag %q: flags follow the command (azkafka <command> [flags])", name)
		} else if best := closest(name, slices.Sorted(maps.Keys(commands))); best != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", best)
		}
		return failUsage(stderr, "", "", "%s", msg)
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: azkafka <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "  %-10s %s\n", "help", "show this help, or a command's help: azkafka help <command>")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit status: 0 success, 1 failure (e.g. nothing found), 2 usage or configuration error.")
}

// version is set at link time with -ldflags "-X main.version=v1.2.3"; when
// empty, the module version from the build info is used.
var version string

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			fmt.Fprintln(stdout, "Usage: azkafka version\n\nPrints the azkafka version and the Go version it was built with.")
			return exitOK
		}
		return failUsage(stderr, "version", "version", "unexpected argument %q", args[0])
	}
	v, goVersion := version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "" {
			v = bi.Main.Version
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(stdout, "azkafka %s (%s)\n", v, goVersion)
	return exitOK
}
