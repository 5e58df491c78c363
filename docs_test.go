package azkafka_test

// The tests of this file keep README.md and docs/*.md true to the tree:
// the README's length, every link (files, anchors, and the packages and
// identifiers of pkg.go.dev links), the code blocks that are copies of
// compiled files, and the go test commands of the measured results.

import (
	"bufio"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxREADMELines is the README's budget: a user's guide, with the reference
// in the package docs and the figures in docs/RESULTS.md.
const maxREADMELines = 400

// markdownFiles are the documents whose links and commands are checked.
var markdownFiles = []string{"README.md", "docs/RESULTS.md", "docs/DEVELOPING.md"}

const modulePath = "github.com/azkafka/azkafka"

func TestREADMEAtMost400Lines(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move reference to the package docs and figures to docs/RESULTS.md", n, maxREADMELines)
	}
}

// mdDoc is a markdown file: its lines outside code blocks, the anchors of
// its headings, and its fenced code blocks.
type mdDoc struct {
	path     string
	prose    []string        // lines outside fences
	lineNo   []int           // the line number of each
	headings map[string]bool // GitHub anchors of the headings
	blocks   []mdBlock
}

type mdBlock struct {
	lang string
	text string
	line int    // line of the opening fence
	from string // the last .go file linked between the previous block and this one
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	goLinkRE = regexp.MustCompile(`\]\(([^)\s#]+\.go)\)`)
)

func readMarkdown(t *testing.T, path string) *mdDoc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &mdDoc{path: path, headings: map[string]bool{}}
	seen := map[string]int{}
	var block *mdBlock
	var body []string
	lastGo := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if block == nil {
				block = &mdBlock{lang: strings.TrimPrefix(line, "```"), line: n, from: lastGo}
				body = body[:0]
			} else {
				block.text = strings.Join(body, "\n") + "\n"
				d.blocks = append(d.blocks, *block)
				block, lastGo = nil, ""
			}
			continue
		}
		if block != nil {
			body = append(body, line)
			continue
		}
		d.prose = append(d.prose, line)
		d.lineNo = append(d.lineNo, n)
		if m := goLinkRE.FindAllStringSubmatch(line, -1); m != nil {
			lastGo = m[len(m)-1][1]
		}
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			a := githubAnchor(h)
			if k := seen[a]; k > 0 {
				d.headings[a+"-"+strconv.Itoa(k)] = true
			} else {
				d.headings[a] = true
			}
			seen[a]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if block != nil {
		t.Fatalf("%s:%d: code block never closed", path, block.line)
	}
	return d
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, other punctuation dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// pkgDoc is what pkg.go.dev shows of one package: its identifiers and the
// anchors of its doc's headings.
type pkgDoc struct {
	idents   map[string]bool
	headings map[string]bool
}

var pkgDocs = map[string]*pkgDoc{}

func loadPkgDoc(t *testing.T, dir string) *pkgDoc {
	t.Helper()
	if p, ok := pkgDocs[dir]; ok {
		return p
	}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("pkg.go.dev link to %s: %v", dir, err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("pkg.go.dev link to %s: no Go package there", dir)
	}
	dp, err := doc.NewFromFiles(fset, files, modulePath+"/"+dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &pkgDoc{idents: map[string]bool{}, headings: map[string]bool{}}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				p.idents[n] = true
			}
		}
	}
	values(dp.Consts)
	values(dp.Vars)
	for _, f := range dp.Funcs {
		p.idents[f.Name] = true
	}
	for _, ty := range dp.Types {
		p.idents[ty.Name] = true
		values(ty.Consts)
		values(ty.Vars)
		for _, f := range ty.Funcs {
			p.idents[f.Name] = true
		}
		for _, m := range ty.Methods {
			p.idents[ty.Name+"."+m.Name] = true
		}
	}
	for _, b := range dp.Parser().Parse(dp.Doc).Content {
		if h, ok := b.(*comment.Heading); ok {
			p.headings[h.DefaultID()] = true
		}
	}
	pkgDocs[dir] = p
	return p
}

// optionalDirs are linked directories that are modules of their own (the
// metrics exporters): checked when present in the checkout.
var optionalDirs = []string{"contrib/prometheus", "contrib/otel"}

// TestREADMELinks: every link of the README and of docs/*.md leads
// somewhere: a file or directory of the tree (and a heading of it, for an
// anchor into a markdown file), a heading of the same file, or a package
// of this module on pkg.go.dev (and an identifier, or a heading of the
// package doc, for an anchor).
func TestREADMELinks(t *testing.T) {
	docs := map[string]*mdDoc{}
	for _, p := range markdownFiles {
		docs[p] = readMarkdown(t, p)
	}
	checked := 0
	for _, path := range markdownFiles {
		d := docs[path]
		for i, line := range d.prose {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				where := d.path + ":" + strconv.Itoa(d.lineNo[i])
				checked++
				switch {
				case strings.HasPrefix(target, "https://pkg.go.dev/"+modulePath):
					rest := strings.TrimPrefix(target, "https://pkg.go.dev/"+modulePath)
					rest, anchor, _ := strings.Cut(rest, "#")
					dir := strings.TrimPrefix(rest, "/")
					if dir == "" {
						continue // the module's page
					}
					p := loadPkgDoc(t, dir)
					switch {
					case anchor == "":
					case strings.HasPrefix(anchor, "hdr-"):
						if !p.headings[anchor] {
							t.Errorf("%s: %s: the %s package doc has no heading %s", where, target, dir, anchor)
						}
					case !p.idents[anchor]:
						t.Errorf("%s: %s: package %s has no exported %s", where, target, dir, anchor)
					}
				case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
					// Outside this repository.
				case strings.HasPrefix(target, "#"):
					if !d.headings[target[1:]] {
						t.Errorf("%s: link %s: no such heading in %s", where, target, d.path)
					}
				default:
					file, anchor, _ := strings.Cut(target, "#")
					rel := filepath.Clean(filepath.Join(filepath.Dir(d.path), file))
					if _, err := os.Stat(rel); err != nil {
						if slices.Contains(optionalDirs, rel) {
							continue
						}
						t.Errorf("%s: link %s: %v", where, target, err)
						continue
					}
					if anchor != "" {
						od, ok := docs[rel]
						if !ok {
							t.Errorf("%s: link %s: anchor into a file this test does not read", where, target)
						} else if !od.headings[anchor] {
							t.Errorf("%s: link %s: no such heading in %s", where, target, rel)
						}
					}
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d links", checked)
	}
}

// TestREADMECodeBlocksAreCompiledCopies: a Go block of the README that
// follows a link to a .go file is that file's code, so that it compiles:
// the whole file for the program of Get started, a run of its lines
// (indentation aside) for the others.
func TestREADMECodeBlocksAreCompiledCopies(t *testing.T) {
	d := readMarkdown(t, "README.md")
	copies := 0
	for _, b := range d.blocks {
		if b.lang != "go" || b.from == "" {
			continue
		}
		src, err := os.ReadFile(b.from)
		if err != nil {
			t.Errorf("README.md:%d: the block's source %s: %v", b.line, b.from, err)
			continue
		}
		copies++
		if strings.HasPrefix(b.text, "// Command ") || strings.HasPrefix(b.text, "package ") {
			if b.text != string(src) {
				t.Errorf("README.md:%d: the program differs from %s; copy the file into the README", b.line, b.from)
			}
			continue
		}
		if !containsLines(string(src), b.text) {
			t.Errorf("README.md:%d: the block is not a run of lines of %s; copy it from there", b.line, b.from)
		}
	}
	if copies < 3 {
		t.Fatalf("%d Go blocks are copies of a file; want the program, TLS and SASL, and iq", copies)
	}
	main, err := os.ReadFile("examples/getstarted/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(d.blocks, func(b mdBlock) bool { return b.text == string(main) }) {
		t.Error("README.md does not show examples/getstarted/main.go whole")
	}
}

// containsLines reports whether the lines of block, leading whitespace
// aside, are a run of consecutive lines of src.
func containsLines(src, block string) bool {
	trim := func(s string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			out = append(out, strings.TrimLeft(l, " \t"))
		}
		return out
	}
	s, b := trim(src), trim(block)
	for i := 0; i+len(b) <= len(s); i++ {
		if slices.Equal(s[i:i+len(b)], b) {
			return true
		}
	}
	return false
}

var (
	goRunRE   = regexp.MustCompile(`go run (\./examples/[a-z0-9]+)`)
	goTestRE  = regexp.MustCompile("go test [^`]*")
	runFlagRE = regexp.MustCompile(`-(run|bench) +('[^']*'|\S+)`)
	confRunRE = regexp.MustCompile(`CONFORMANCE_(RUN|BENCH)='?([A-Za-z0-9_|]+)'?`)
	funcRE    = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
)

// testFuncs returns the names of the test, benchmark, example and fuzz
// functions of the package in dir.
func testFuncs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// TestREADMECommandsNameWhatExists: the examples the documents run exist,
// and every go test -run or -bench pattern, and every CONFORMANCE_RUN or
// CONFORMANCE_BENCH, matches a function of the package it names, so that
// each figure's command still produces it.
func TestREADMECommandsNameWhatExists(t *testing.T) {
	commands := 0
	for _, path := range markdownFiles {
		d := readMarkdown(t, path)
		text := strings.Join(d.prose, "\n")
		for _, b := range d.blocks {
			text += "\n" + b.text
		}
		for _, m := range goRunRE.FindAllStringSubmatch(text, -1) {
			commands++
			if _, err := os.Stat(filepath.Join(m[1], "main.go")); err != nil {
				t.Errorf("%s: go run %s: %v", path, m[1], err)
			}
		}
		// Commands wrap across lines in the prose: join them first.
		flat := strings.Join(strings.Fields(text), " ")
		for _, cmd := range goTestRE.FindAllString(flat, -1) {
			var dirs []string
			for _, f := range strings.Fields(cmd) {
				if strings.HasPrefix(f, "./") && !strings.Contains(f, "...") {
					dirs = append(dirs, strings.TrimSuffix(strings.TrimPrefix(f, "./"), "/"))
				}
			}
			for _, m := range runFlagRE.FindAllStringSubmatch(cmd, -1) {
				// As go test reads it: the part before the first slash
				// selects the top-level function, the rest its subtests.
				pattern, _, _ := strings.Cut(strings.Trim(m[2], "'"), "/")
				if pattern == "^$" || pattern == "X" || pattern == "XXX" || pattern == "." {
					continue
				}
				re, err := regexp.Compile(pattern)
				if err != nil {
					t.Errorf("%s: %q: %v", path, cmd, err)
					continue
				}
				for _, dir := range dirs {
					commands++
					if !slices.ContainsFunc(testFuncs(t, dir), re.MatchString) {
						t.Errorf("%s: `%s`: no function of ./%s matches -%s %s", path, cmd, dir, m[1], pattern)
					}
				}
			}
		}
		for _, m := range confRunRE.FindAllStringSubmatch(flat, -1) {
			commands++
			re := regexp.MustCompile(m[2])
			if !slices.ContainsFunc(testFuncs(t, "conformance"), re.MatchString) {
				t.Errorf("%s: CONFORMANCE_%s=%s matches no function of ./conformance", path, m[1], m[2])
			}
		}
	}
	if commands < 25 {
		t.Fatalf("checked only %d commands", commands)
	}
}
