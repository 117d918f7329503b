package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/9harness/9harness/internal/cli"
)

// TestHelpsComplete: the usage names every command, and the shell
// completions find --help among every command's flags, so each help
// lists its flags in the form __complete reads.
func TestHelpsComplete(t *testing.T) {
	complete := func(args ...string) []string {
		var out, errs bytes.Buffer
		if code := run(append([]string{"__complete"}, args...), nil, &out, &errs); code != 0 {
			t.Fatalf("__complete %q: exit %d: %s", args, code, errs.String())
		}
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			name, _, _ := strings.Cut(l, "\t")
			names = append(names, name)
		}
		return names
	}
	global := complete("flags")
	for _, f := range []string{"-s", "--socket", "--aname", "--version", "-h", "--help", "--ssh", "--ssh-opt", "--ssh-cmd"} {
		if !slices.Contains(global, f) {
			t.Errorf("the usage's flags %q lack %s", global, f)
		}
	}
	cmds := complete("commands")
	for _, c := range append(slices.Clone(commands), cli.Command{Name: "version", Help: cli.VersionHelp}) {
		if c.Help == "" {
			continue
		}
		if !slices.Contains(cmds, c.Name) {
			t.Errorf("the usage's commands %q lack %s", cmds, c.Name)
		}
		if !slices.Contains(complete("flags", c.Name), "--help") {
			t.Errorf("%s's help lists no --help", c.Name)
		}
	}
}
