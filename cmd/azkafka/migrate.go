package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/azkafka/azkafka/internal/migrate"
)

const migrateUsage = `Usage: azkafka migrate [-C dir] [-w] [-diff] [--dialers] [PACKAGES...]

Moves Go packages from kafka-go's Writer and Reader to the SDK's
(github.com/azkafka/azkafka/sdk), which have kafka-go's methods and
meaning. Run it in the module (or name it with -C), on the packages to
move (default ./...); they must build first. Without -w it changes nothing
and prints a unified diff (-diff, the default) of what it would write.

Rewritten, in the packages given and their tests:
  kafka.NewReader(cfg)          sdk.MustNewReader(cfg)
  &kafka.Writer{...}            sdk.MustNewWriter(&kafka.Writer{...})
  *kafka.Writer, *kafka.Reader  *sdk.Writer, *sdk.Reader, in signatures,
                                fields, variables, interfaces and composite
                                types
  kafka.WriterStats,            sdk.WriterStats, sdk.ReaderStats (which
  kafka.ReaderStats             embed kafka-go's); a literal T{...} becomes
                                sdk.T{T: kafka.T{...}}
  imports                       sdk added (as azsdk where sdk names
                                something else in scope); kafka-go removed
                                when unused
With --dialers also &kafka.Dialer{...} and &kafka.Transport{...}, which
become sdk.MustNewAZAwareDialer(...) and sdk.MustNewTransport(...): kafka-go
clients on them keep kafka-go's engine, with the SDK's client ID,
connection policy and frame guard.

sdk.MustNewReader panics exactly where kafka.NewReader panics (naming the
field), and where the SDK's engine cannot honour a value kafka-go takes:
MaxWait above 24 days, MaxBytes above 715827883, with GroupID a SessionTimeout
or RebalanceTimeout below 100ms, a HeartbeatInterval above SessionTimeout,
a negative CommitInterval (go doc github.com/azkafka/azkafka/sdk
MustNewReader). sdk.MustNewWriter panics where sdk.NewWriter refuses a
field. Both panic for invalid options or AZKAFKA_* variables. A second run
changes nothing.

Refused: a package is left unchanged, and each site reported with its
position and the reason, when it
  - lets a value flow between a type the rewrite changes and one it keeps:
    an argument, assignment, return, composite-literal element, send,
    comparison or interface conversion where one side's type, declared
    outside the packages given (another module), holds kafka.Writer,
    Reader, WriterStats or ReaderStats (a func taking a kafka.WriterStats,
    []*kafka.Writer or func(*kafka.Writer), a variable there assigned a
    Writer, an interface there whose method returns one), or gives a
    Writer or Reader as any to code there (fmt, log, log/slog and testing
    excepted), which may assert kafka-go's type;
  - gives a Writer or Reader to package reflect, reads a field of one (the
    SDK's types have no fields), embeds one, holds one by value or copies
    one (*w);
  - writes a &kafka.Writer{...} without Addr, or with a Transport other
    than a *kafka.Transport: kafka-go's is valid until its first write,
    sdk.MustNewWriter would panic;
  - calls kafka.NewWriter(kafka.WriterConfig{...}) (no &kafka.Writer{...}
    is exactly its Writer: write one), or uses kafka.NewReader or
    kafka.NewWriter as a function value;
and so is every package given that shares Writer or Reader values with a
package left unchanged, and any package that, rewritten, would not build
(the type checker's error is reported).

With -w, each module whose files were rewritten is made to require
github.com/azkafka/azkafka: migrate runs, in its directory,
  go get github.com/azkafka/azkafka/sdk@VERSION
VERSION being the one its go.mod requires, else its replace directive's,
else this binary's. When it cannot (no version known, the go command
failed, or the module vendors), the last line printed is the command to
run.

Flags:
  -C dir     run in dir: the packages, and the paths printed, are relative
             to it (as go -C)
  -w         write the changes to the files, then update go.mod
  -diff      print the unified diff (the default without -w)
  --dialers  also rewrite kafka.Dialer and kafka.Transport literals

Exit status: 0 done (sites left unchanged are listed on stderr), 1 the
packages do not build or a file could not be written, 2 bad flags.
`

func runMigrate(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("migrate", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	chdir := flags.String("C", "", "")
	write := flags.Bool("w", false, "")
	diff := flags.Bool("diff", false, "")
	dialers := flags.Bool("dialers", false, "")
	rest, err := parseInterleaved(flags, args)
	if err == flag.ErrHelp {
		fmt.Fprint(stdout, migrateUsage)
		return exitOK
	}
	if err != nil {
		return failUsage(stderr, "migrate", "migrate", "%s", flagError(flags, err))
	}
	if len(rest) == 0 {
		rest = []string{"./..."}
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "azkafka migrate: %v\n", err)
		return exitFail
	}
	if *chdir != "" {
		dir := *chdir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(wd, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return failUsage(stderr, "migrate", "migrate", "-C %s: not a directory", *chdir)
		}
		wd = dir
	}
	res, err := migrate.Run(migrate.Config{Dir: wd, Patterns: rest, Dialers: *dialers, SDKVersion: binaryVersion()})
	if err != nil {
		fmt.Fprintf(stderr, "azkafka %v\n", err)
		return exitFail
	}
	if *diff || !*write {
		if err := res.WriteDiff(stdout, wd); err != nil {
			fmt.Fprintf(stderr, "azkafka migrate: %v\n", err)
			return exitFail
		}
	}
	if *write {
		if err := res.Write(); err != nil {
			fmt.Fprintf(stderr, "azkafka migrate: %v\n", err)
			return exitFail
		}
	}
	for _, s := range res.Refused {
		fmt.Fprintln(stderr, s.Rel(wd))
	}
	if res.Unverified != "" {
		fmt.Fprintf(stderr, "azkafka migrate: the rewrite was not type-checked: %s\n", res.Unverified)
	}
	verb := "would rewrite"
	if *write {
		verb = "rewrote"
	}
	fmt.Fprintf(stderr, "azkafka migrate: %s %s in %s; %s left unchanged\n", verb, count(res.Rewrites, "site"), count(len(res.Files), "file"), count(len(res.Refused), "site"))
	if *write {
		requireSDK(res, wd, stderr)
	}
	return exitOK
}

// requireSDK makes the modules of res's files require the SDK's module,
// and prints what it ran; what it could not, the command to run, last.
func requireSDK(res *migrate.Result, wd string, stderr io.Writer) {
	var todo []string
	for _, mod := range res.Modules {
		cmd, ran, err := migrate.RequireSDK(mod, binaryVersion(), nil)
		switch {
		case cmd == "":
		case ran:
			fmt.Fprintf(stderr, "azkafka migrate: %s: ran %s\n", mod.Path, cmd)
		default:
			fmt.Fprintf(stderr, "azkafka migrate: %s does not require %s yet: %v\n", mod.Path, migrate.SDKModule, err)
			if rel, rerr := filepath.Rel(wd, mod.Dir); rerr == nil && rel != "." {
				cmd = "cd " + rel + " && " + cmd
			}
			todo = append(todo, cmd)
		}
	}
	for _, cmd := range todo {
		fmt.Fprintln(stderr, cmd)
	}
}

// binaryVersion is the version of the SDK's module this binary was built
// from ("(devel)" from a checkout).
func binaryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if info.Main.Path == migrate.SDKModule {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == migrate.SDKModule {
			return d.Version
		}
	}
	return ""
}

// count is "1 site", "2 sites".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
