package migrate

// gomod.go makes a migrated module require the SDK's: without the
// requirement and its go.sum entries, `go build` (-mod=readonly) refuses
// the new import ("no required module provides package", "missing go.sum
// entry").

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RequireSDK makes mod require SDKModule, with the go.sum entries of
// package sdk and its imports: it runs `go get
// github.com/azkafka/azkafka/sdk@V` in mod.Dir, V being the version mod
// requires already, else the replacement's (a replace directive of
// SDKModule in its go.mod), else version, the version of the azkafka
// binary running. It returns the command, and whether it ran it; when it
// did not, or the command failed, err says why and the user runs the
// command (also when mod vendors its dependencies: then with `go mod
// vendor`). Nothing is to do for SDKModule itself (cmd is "").
func RequireSDK(mod Module, version string, env []string) (cmd string, ran bool, err error) {
	if mod.Path == SDKModule || mod.Dir == "" {
		return "", false, nil
	}
	if env == nil {
		env = os.Environ()
	}
	arg, err := getArg(mod, version, env)
	if err != nil {
		return "go get " + sdkPath + "@latest", false, err
	}
	cmd = "go get " + arg
	if _, err := os.Stat(filepath.Join(mod.Dir, "vendor", "modules.txt")); err == nil {
		return cmd + " && go mod vendor", false, errors.New(mod.Path + " vendors its dependencies")
	}
	get := exec.Command("go", "get", arg)
	get.Dir, get.Env = mod.Dir, env
	if out, err := get.CombinedOutput(); err != nil {
		return cmd, false, fmt.Errorf("%s: %v", strings.TrimSpace(string(out)), err)
	}
	return cmd, true, nil
}

// getArg is the argument of the go get that makes mod require the SDK's
// module: package sdk at the version mod requires, else its replacement's,
// else version.
func getArg(mod Module, version string, env []string) (string, error) {
	edit := exec.Command("go", "mod", "edit", "-json")
	edit.Dir, edit.Env = mod.Dir, env
	out, err := edit.Output()
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", mod.GoMod, err)
	}
	var gomod struct {
		Require []struct{ Path, Version string }
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		return "", fmt.Errorf("reading %s: %w", mod.GoMod, err)
	}
	for _, r := range gomod.Require {
		if r.Path == SDKModule {
			return sdkPath + "@" + r.Version, nil
		}
	}
	for _, r := range gomod.Replace {
		if r.Old.Path == SDKModule {
			if r.Old.Version != "" {
				return sdkPath + "@" + r.Old.Version, nil
			}
			return sdkPath, nil // the replacement decides the version
		}
	}
	if usableVersion(version) {
		return sdkPath + "@" + version, nil
	}
	return "", errors.New("this azkafka binary has no module version (built from a checkout), and " + mod.GoMod + " neither requires nor replaces " + SDKModule)
}

// tempModfile writes, in a new temporary directory, mod's go.mod and
// go.sum as go get makes them requiring package sdk, for -modfile: the
// rewrite is type-checked with the requirement it will have, mod's own
// files left as they are. cleanup removes the directory.
func tempModfile(mod Module, version string, env []string) (modfile string, cleanup func(), err error) {
	arg, err := getArg(mod, version, env)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "azkafka-migrate-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	modfile = filepath.Join(dir, "go.mod")
	for from, to := range map[string]string{mod.GoMod: modfile, strings.TrimSuffix(mod.GoMod, ".mod") + ".sum": filepath.Join(dir, "go.sum")} {
		b, err := os.ReadFile(from)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			cleanup()
			return "", nil, err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	get := exec.Command("go", "get", "-modfile="+modfile, arg)
	get.Dir, get.Env = mod.Dir, env
	if out, err := get.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go get %s: %s", arg, strings.TrimSpace(string(out)))
	}
	return modfile, cleanup, nil
}

// usableVersion reports whether v, a binary's module version, names a
// version the go command can fetch: a release or a pseudo-version, not
// "(devel)" nor a checkout's modified tree ("+dirty").
func usableVersion(v string) bool {
	return strings.HasPrefix(v, "v") && !strings.Contains(v, "+")
}
