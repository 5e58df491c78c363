package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

type conf struct {
	n    int
	name string
	host string
}

var table = []Var[conf]{
	{Name: "AZKAFKA_N", Default: Code(3), Option: "WithN", Doc: "A number.",
		Set: func(c *conf, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return errors.New("not an integer")
			}
			c.n = n
			return nil
		}},
	{Name: "AZKAFKA_NAME", Default: "none", Option: "WithName", Doc: "A name.",
		Set: func(c *conf, v string) error { c.name = v; return nil }},
	{Name: "PLATFORM_HOST", Option: "Config.Host", Foreign: true,
		Set: func(c *conf, v string) error { c.host = v; return nil }},
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want conf
		err  string
	}{
		{env: nil},
		{env: map[string]string{"AZKAFKA_N": " 7 ", "AZKAFKA_NAME": "x", "PLATFORM_HOST": "h"}, want: conf{7, "x", "h"}},
		{env: map[string]string{"PLATFORM_HOST": "  "}},
		{env: map[string]string{"AZKAFKA_NAME": ""}, err: "pkg: AZKAFKA_NAME is set but blank: unset it or give it a value"},
		{env: map[string]string{"AZKAFKA_N": "abc", "AZKAFKA_NAME": " "},
			err: "pkg: AZKAFKA_N=\"abc\": not an integer\npkg: AZKAFKA_NAME is set but blank: unset it or give it a value"},
	} {
		var c conf
		err := Apply("pkg", table, &c, lookup(tc.env))
		switch {
		case tc.err == "" && err != nil, tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%v: err = %v, want %q", tc.env, err, tc.err)
		case tc.err == "" && c != tc.want:
			t.Errorf("%v: %+v, want %+v", tc.env, c, tc.want)
		}
	}
}

func TestRows(t *testing.T) {
	got := strings.Join(Rows(table), "\n")
	want := "| `AZKAFKA_N` | `3` | A number. |\n| `AZKAFKA_NAME` | none | A name. |"
	if got != want {
		t.Errorf("Rows:\n%s\nwant\n%s", got, want)
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("abc"); got != `"abc"` {
		t.Errorf("Quote = %s", got)
	}
	long := strings.Repeat("a", 63) + "é" + strings.Repeat("b", 10)
	if got, want := Quote(long), strconv.Quote(strings.Repeat("a", 63))+"...(75 bytes)"; got != want {
		t.Errorf("Quote cut inside a character: %s, want %s", got, want)
	}
}

func TestParseBool(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "TRUE": true, "False": false} {
		if got, err := ParseBool(v); err != nil || got != want {
			t.Errorf("ParseBool(%q) = %v, %v", v, got, err)
		}
	}
	for _, v := range []string{"1", "t", "yes", "on"} {
		if _, err := ParseBool(v); err == nil || err.Error() != "want true or false (any case)" {
			t.Errorf("ParseBool(%q): err = %v", v, err)
		}
	}
}

func TestRegister(t *testing.T) {
	Register("pkg", table, func() conf { return conf{} })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a variable registered by two packages did not panic")
			}
		}()
		Register("other", table[:1], func() conf { return conf{} })
	}()
	var names []string
	for _, e := range Entries() {
		if e.Package == "pkg" || e.Package == "other" {
			names = append(names, e.Package+":"+e.Name)
		}
	}
	if got := strings.Join(names, ","); got != "pkg:AZKAFKA_N,pkg:AZKAFKA_NAME,pkg:PLATFORM_HOST" {
		t.Errorf("Entries: %s", got)
	}
	for _, e := range Entries() {
		if e.Name == "AZKAFKA_N" {
			if set, err := e.Check(" 12 "); !set || err != nil {
				t.Errorf("Check(\" 12 \") = %v, %v", set, err)
			}
			if _, err := e.Check("x"); err == nil || Describe(e.Package, e.Name, "x", err).Error() != `pkg: AZKAFKA_N="x": not an integer` {
				t.Errorf("Check(x): %v", err)
			}
			if _, err := e.Check("  "); err == nil || Describe(e.Package, e.Name, "  ", err).Error() != "pkg: AZKAFKA_N is set but blank: unset it or give it a value" {
				t.Errorf("Check(blank): %v", err)
			}
		}
	}
}

func TestApplyOpts(t *testing.T) {
	names := Constructors{"NewA", "NewB", "NewC"}
	const a, b, c Ctors = 1, 2, 4
	setN := func(name string, takes Ctors, n int) Opt[conf] {
		return Opt[conf]{Name: name, Takes: takes, Set: func(x *conf) error {
			if n < 0 {
				return fmt.Errorf("%s(%d): negative", name, n)
			}
			x.n = n
			return nil
		}}
	}
	var x conf
	err := ApplyOpts("pkg", names, b, &x, []Opt[conf]{setN("WithN", a|b, 1), setN("WithN", a|b, 2), setN("WithA", a, 3), setN("WithAC", a|c, 3), setN("WithN", a|b, -1)})
	want := "pkg: NewB: WithA is an option of NewA only\n" +
		"pkg: NewB: WithAC is an option of NewA and NewC\n" +
		"pkg: WithN(-1): negative"
	if err == nil || err.Error() != want || x.n != 2 {
		t.Errorf("ApplyOpts: n = %d, err = %v, want %q", x.n, err, want)
	}
	x = conf{}
	if err := ApplyOpts("pkg", names, 0, &x, []Opt[conf]{setN("WithA", a, 3)}); err != nil || x.n != 3 {
		t.Errorf("ApplyOpts for any constructor: n = %d, err = %v", x.n, err)
	}
}

func TestApplyDefaults(t *testing.T) {
	var x conf
	ApplyDefaults([]Var[conf]{{Name: "AZKAFKA_N", Default: Code(7), Set: table[0].Set}, {Name: "AZKAFKA_W", Default: "none", Set: table[0].Set}}, &x)
	if x.n != 7 {
		t.Errorf("ApplyDefaults: n = %d, want 7", x.n)
	}
	defer func() {
		if recover() == nil {
			t.Error("a default its row refuses did not panic")
		}
	}()
	ApplyDefaults([]Var[conf]{{Name: "AZKAFKA_N", Default: Code("x"), Set: table[0].Set}}, &x)
}
