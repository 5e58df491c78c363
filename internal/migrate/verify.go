package migrate

// verify.go type-checks the packages as rewritten: what the checks of
// migrate.go and flow.go did not foresee is found there, and the package
// left unchanged, so that the migration never writes code that does not
// build.

import (
	"fmt"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// verify loads the given packages with res's files over theirs and
// returns, by unit to leave unchanged, the errors they have: a rewritten
// unit's own, or those of a unit left unchanged that fails on the rewrite
// of one it imports.
func (m *migration) verify(res *Result) (map[string][]Site, error) {
	overlay := map[string][]byte{}
	maps.Copy(overlay, m.cfg.Overlay)
	maps.Copy(overlay, res.Files)
	pcfg := &packages.Config{Mode: loadMode, Dir: m.cfg.Dir, Tests: true, Fset: token.NewFileSet(), Overlay: overlay, Env: m.env}
	if len(res.Modules) > 1 {
		res.Unverified = "the packages are in more than one module"
		return nil, nil
	}
	if len(res.Modules) == 1 && res.Modules[0].Path != SDKModule {
		// The module does not require the SDK yet (RequireSDK does, after
		// -w): type-check with a go.mod that does.
		modfile, cleanup, err := tempModfile(res.Modules[0], m.cfg.SDKVersion, m.env)
		if err != nil {
			res.Unverified = "package sdk cannot be resolved for " + res.Modules[0].Path + ": " + err.Error()
			return nil, nil
		}
		defer cleanup()
		pcfg.BuildFlags = []string{"-mod=mod", "-modfile=" + modfile}
	}
	pkgs, err := packages.Load(pcfg, m.cfg.Patterns...)
	if err != nil {
		return nil, fmt.Errorf("migrate: type-checking the rewrite: %w", err)
	}
	rewritten := map[string]bool{}
	for _, path := range m.order {
		for name := range m.units[path].files {
			if res.Files[name] != nil {
				rewritten[path] = true
			}
		}
	}
	bad := map[string][]Site{}
	seen := map[string]bool{}
	for _, p := range pkgs {
		path := basePath(p)
		u := m.units[path]
		if u == nil || strings.HasSuffix(p.PkgPath, ".test") {
			continue
		}
		errs := p.Errors
		if slices.ContainsFunc(errs, func(e packages.Error) bool { return e.Kind == packages.TypeError }) {
			// The compiler's output, when there, repeats them.
			errs = slices.DeleteFunc(slices.Clone(errs), func(e packages.Error) bool { return e.Kind != packages.TypeError })
		}
		for _, e := range errs {
			pos := oldPosition(res, e.Pos, sortedNames(u.files)[0])
			if seen[pos.String()+e.Msg] {
				continue
			}
			seen[pos.String()+e.Msg] = true
			if rewritten[path] && u.pinnedBy == "" {
				bad[path] = append(bad[path], Site{Pos: pos, Reason: "the package as rewritten would not build: " + e.Msg})
				continue
			}
			for imp := range u.imports {
				if o := m.units[imp]; o != nil && o.pinnedBy == "" && rewritten[imp] {
					bad[imp] = append(bad[imp], Site{Pos: pos, Reason: "package " + path + " would not build on the rewrite of " + imp + ": " + e.Msg})
				}
			}
		}
	}
	return bad, nil
}

// oldPosition is the position, in the file before the rewrite, of pos
// ("file:line:col") in the rewritten file; first when pos has no file.
func oldPosition(res *Result, pos, first string) token.Position {
	name, col := pos, 0
	line := 0
	if i := strings.LastIndexByte(name, ':'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			name, col = name[:i], n
		}
	}
	if i := strings.LastIndexByte(name, ':'); i > 0 {
		if n, err := strconv.Atoi(name[i+1:]); err == nil {
			name, line = name[:i], n
		}
	}
	if line == 0 {
		return token.Position{Filename: first, Line: 1, Column: 1}
	}
	if nb, ok := res.Files[name]; ok {
		// A line added in a run of changes stands for the line removed
		// at its place in the run, else the last one removed.
		var removed []int
		added := 0
		for _, op := range editScript(lines(string(res.Old[name])), lines(string(nb))) {
			switch op.kind {
			case ' ':
				removed, added = removed[:0], 0
				if op.bi == line-1 {
					return token.Position{Filename: name, Line: op.ai + 1, Column: col}
				}
			case '-':
				removed = append(removed, op.ai)
			case '+':
				if op.bi == line-1 {
					old := op.ai
					if len(removed) > 0 {
						old = removed[min(added, len(removed)-1)]
					}
					return token.Position{Filename: name, Line: old + 1, Column: col}
				}
				added++
			}
		}
	}
	return token.Position{Filename: name, Line: line, Column: col}
}
