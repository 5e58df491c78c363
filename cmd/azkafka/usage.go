package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// failUsage reports a usage error of `azkafka cmd` in one line, then where
// its help is (`azkafka help --help`; `azkafka --help` for help ""), and
// returns exitUsage. The whole usage is not repeated: a misspelled flag
// should not bury its own error under a page of help.
func failUsage(stderr io.Writer, cmd, help, format string, a ...any) int {
	prefix := "azkafka"
	if cmd != "" {
		prefix += " " + cmd
	}
	see := "azkafka"
	if help != "" {
		see += " " + help
	}
	fmt.Fprintf(stderr, "%s: %s\n", prefix, fmt.Sprintf(format, a...))
	fmt.Fprintf(stderr, "see %s --help\n", see)
	return exitUsage
}

// flagError words err of fs.Parse for failUsage: the flag package's own
// message, and for an undefined flag the closest defined one.
func flagError(fs *flag.FlagSet, err error) string {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, undefined)
	if !ok {
		return msg
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := closest(strings.TrimLeft(name, "-"), names); best != "" {
		msg += " (did you mean --" + best + "?)"
	}
	return msg
}

// closest returns the candidate nearest to s by edit distance, if it is
// near enough to be a misspelling (at most a third of s's length, and 2),
// else "". Ties go to the first candidate.
func closest(s string, candidates []string) string {
	best, bestD := "", min(2, len(s)/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and transpositions of
// neighbours (the commonest typo) each count 1.
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
