package migrate

// diff.go prints what a run would change as a unified diff (the dry run
// of `azkafka migrate -diff`).

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// WriteDiff writes res's changes to w as unified diffs, one per file,
// paths relative to dir.
func (res *Result) WriteDiff(w io.Writer, dir string) error {
	names := make([]string, 0, len(res.Files))
	for n := range res.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		rel := strings.TrimPrefix(strings.TrimPrefix(n, dir), "/")
		if _, err := io.WriteString(w, unified(rel, string(res.Old[n]), string(res.Files[n]))); err != nil {
			return err
		}
	}
	return nil
}

// unified is the unified diff (3 lines of context) from a to b.
func unified(name, a, b string) string {
	x, y := lines(a), lines(b)
	ops := editScript(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n", name, name)
	const ctx = 3
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from ctx lines before the change to ctx after the
		// last change that is within 2*ctx of the next.
		start := max(i-ctx, 0)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*ctx {
				break
			}
		}
		end = min(end+ctx+1, len(ops))
		ax, bx, an, bn := ops[start].ai, ops[start].bi, 0, 0
		var body strings.Builder
		for _, op := range ops[start:end] {
			body.WriteString(string(op.kind) + op.text)
			if op.kind != '+' {
				an++
			}
			if op.kind != '-' {
				bn++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n%s", ax+1, an, bx+1, bn, body.String())
		i = end
	}
	return out.String()
}

// lines splits s into lines, each with its newline.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// op is one line of an edit script: kept (' '), removed ('-') or added
// ('+'), with the indexes in a and b where it stands.
type op struct {
	kind   byte
	text   string
	ai, bi int
}

// editScript is a shortest edit script from x to y by their longest
// common subsequence (source files are small: quadratic is enough).
func editScript(x, y []string) []op {
	n, m := len(x), len(y)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i, j})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', y[j], i, j})
			j++
		}
	}
	return ops
}

// Write writes res's files in place, keeping their permissions.
func (res *Result) Write() error {
	for name, b := range res.Files {
		st, err := os.Stat(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(name, b, st.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
