// Package complete is the hidden 9harness __complete, the candidates the
// shell completions ask for: commands and flags (read from the help
// texts), ps's sort keys, ssh hosts, and what the daemon knows (agents,
// harnesses, tree paths).
package complete

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/cli/ps"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// completeTimeout bounds a completion's wait for the daemon: a shell that
// waits longer than this for a Tab is worse than no candidates.
const completeTimeout = 3 * time.Second

// Run is the hidden `9harness __complete KIND [PREFIX]` that the
// shell completions in packaging/completions call for the candidates only
// the daemon or the user's files know, one a line, those that start with
// PREFIX:
//
//	agents     HARNESS/PID of each live agent (for move)
//	harnesses  the harnesses of the tree's /active (for ps --harness)
//	paths      the entries of PREFIX's directory in the tree, a directory's
//	           with a trailing / (for ls, cat, stat)
//	hosts      ssh hosts: the Host lines of ~/.ssh/config (no patterns) and
//	           the lines of $XDG_CONFIG_HOME/9harness/hosts (for --ssh)
//	sort       ps's --sort keys
//	flags      the flags of the command PREFIX (the global ones if
//	           PREFIX is empty), read from its help, which says every flag
//	           it takes
//
// Commands and flags come from the help texts: g.Helps, and usage, the
// program's own. The global flags (-s, --ssh, ...) reach the daemon the
// line names. It prints nothing on stderr: a failure is no candidates and exit 1.
func Run(g *cli.Globals, usage string, args []string, stdout, stderr io.Writer) int {
	ops, status, ok := g.ParseFlags(g.FlagSet("__complete"), args, true, stdout, io.Discard)
	if !ok {
		return status
	}
	if len(ops) < 1 || len(ops) > 2 {
		return cli.ExitUsage
	}
	kind, prefix := ops[0], ""
	if len(ops) == 2 {
		prefix = ops[1]
	}
	switch kind {
	case "flags", "flagdescs":
		return printFlags(g.Helps, usage, kind == "flagdescs", prefix, stdout)
	case "commands":
		for _, c := range usageCommands(usage) {
			if strings.HasPrefix(c.name, prefix) {
				fmt.Fprintf(stdout, "%s\t%s\n", c.name, c.desc)
			}
		}
		return cli.ExitOK
	}
	list := lister(g, kind, prefix)
	if list == nil {
		return cli.ExitUsage
	}
	return printNames(list, prefix, stdout)
}

// printFlags is the flags of the command named (the global ones for ""),
// each with its description if descs.
func printFlags(helps map[string]string, usage string, descs bool, name string, stdout io.Writer) int {
	text, ok := helps[name]
	if name == "" {
		text, ok = usage, true
	}
	if !ok {
		return cli.ExitUsage
	}
	for _, f := range helpFlags(text) {
		if descs {
			fmt.Fprintf(stdout, "%s\t%s\n", f.name, f.desc)
		} else {
			fmt.Fprintln(stdout, f.name)
		}
	}
	return cli.ExitOK
}

// lister is how to find the candidates of kind (nil: no such kind).
func lister(g *cli.Globals, kind, prefix string) func() ([]string, error) {
	switch kind {
	case "hosts":
		return func() ([]string, error) { return sshHosts(), nil }
	case "sort":
		return func() ([]string, error) { return ps.SortKeys(), nil }
	case "agents", "harnesses", "paths":
		return func() ([]string, error) {
			if _, st := g.Check(io.Discard); st != cli.ExitOK {
				return nil, fmt.Errorf("bad flags")
			}
			c, err := g.Dial()
			if err != nil {
				return nil, err
			}
			defer c.Close()
			switch kind {
			case "agents":
				return agentNames(c)
			case "harnesses":
				return c.Harnesses()
			}
			return treeEntries(c, prefix)
		}
	}
	return nil
}

// printNames prints the names list finds that start with prefix, one a
// line, if it finds them within completeTimeout.
func printNames(list func() ([]string, error), prefix string, stdout io.Writer) int {
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		names, err := list()
		done <- result{names, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(completeTimeout):
		return cli.ExitError
	}
	if r.err != nil {
		return cli.ExitError
	}
	out := cli.NewErrWriter(stdout)
	for _, n := range r.names {
		// A name with a control character (a host's file may have one)
		// is no candidate: the shell would show it raw, and its printable
		// form names nothing.
		if strings.HasPrefix(n, prefix) && fleet.Printable(n) == n {
			fmt.Fprintln(out, n)
		}
	}
	if out.Err() != nil {
		return cli.ExitError
	}
	return cli.ExitOK
}

// agentNames lists HARNESS/PID from the directory names of /active alone,
// reading no agent's facts.
func agentNames(c *client.Client) ([]string, error) {
	hs, err := c.Harnesses()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hs {
		ents, err := c.ReadDir(client.ActiveRoot + "/" + h)
		if err != nil {
			continue // gone meanwhile, or not a directory
		}
		for _, e := range ents {
			if e.Name != "." && e.Name != ".." {
				out = append(out, h+"/"+e.Name)
			}
		}
	}
	return out, nil
}

// treeEntries lists the directory that prefix is in (the part up to its
// last /; / if it has none), each entry spelled as prefix's directory
// part plus its name, so that the shell can match it against prefix.
func treeEntries(c *client.Client, prefix string) ([]string, error) {
	dir, spelled := "/", ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		spelled = prefix[:i+1]
		dir = spelled
	}
	ents, err := c.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		n := spelled + e.Name
		if e.QID.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	return out, nil
}

// sshHosts is the hosts of ~/.ssh/config's Host lines, without patterns
// (*, ?, !), and of $XDG_CONFIG_HOME/9harness/hosts (default
// ~/.config/9harness/hosts: one host a line, # comments), sorted, once
// each. A file that is missing adds nothing.
func sshHosts() []string {
	home, _ := os.UserHomeDir()
	seen := map[string]bool{}
	if home != "" {
		forLines(filepath.Join(home, ".ssh", "config"), func(line string) {
			f := strings.Fields(line)
			if len(f) < 2 || !strings.EqualFold(f[0], "host") {
				return
			}
			for _, h := range f[1:] {
				if !strings.ContainsAny(h, "*?!") {
					seen[h] = true
				}
			}
		})
	}
	conf := os.Getenv("XDG_CONFIG_HOME")
	if conf == "" && home != "" {
		conf = filepath.Join(home, ".config")
	}
	if conf != "" {
		forLines(filepath.Join(conf, "9harness", "hosts"), func(line string) {
			if f := strings.Fields(line); len(f) > 0 {
				seen[f[0]] = true
			}
		})
	}
	out := make([]string, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// forLines calls fn with each line of the file at path, its comment (from
// #) and surrounding blanks removed, skipping empty ones.
func forLines(path string, fn func(string)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			fn(line)
		}
	}
}

// described is a candidate and the first line of what its help says of it.
type described struct{ name, desc string }

// helpFlags is the flags a help text lists: its lines that start with two
// spaces and a dash ("  -l, --long  text", "  --json  text") hold them,
// up to the first word that is not one; each is described by the first
// clause of the rest of the line (or, for a long flag, of the next line).
func helpFlags(text string) []described {
	var out []described
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		words := strings.Fields(line)
		var names []string
		rest := ""
		for j, w := range words {
			w = strings.TrimSuffix(w, ",")
			if !strings.HasPrefix(w, "-") {
				if !isMetavar(w) {
					rest = strings.Join(words[j:], " ")
					break
				}
				continue
			}
			names = append(names, w)
		}
		if rest == "" && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "      ") {
			rest = lines[i+1]
		}
		for _, n := range names {
			out = append(out, described{n, firstClause(rest)})
		}
	}
	return out
}

// isMetavar says whether w is a flag's value in a help line (FILE, D,
// KEY, [=WHEN]), not the first word of its description.
func isMetavar(w string) bool {
	w = strings.Trim(w, "[]=")
	return w != "" && (strings.Contains(w, "|") || strings.ToUpper(w) == w && strings.ToLower(w) != w)
}

// usageCommands is the commands of the Commands section of usage, each
// with the first clause of its description: the line's text after the
// synopsis and two spaces ("  mount [-f] DIR    mount the tree ..."), or
// the next line's.
func usageCommands(text string) []described {
	_, section, _ := strings.Cut(text, "\nCommands:\n")
	var out []described
	lines := strings.Split(section, "\n")
	for i, line := range lines {
		if line == "" || !strings.HasPrefix(line, "  ") {
			if line != "" {
				break
			}
			continue
		}
		if strings.HasPrefix(line, "   ") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		// The synopsis ends where the description starts, at column 20,
		// unless it runs past it: then the description is on the next line.
		desc := ""
		if syn := line[:min(len(line), descColumn)]; len(line) > descColumn && syn[descColumn-1] == ' ' &&
			strings.Count(syn, "[") == strings.Count(syn, "]") {
			desc = line[descColumn:]
		} else if i+1 < len(lines) && strings.HasPrefix(lines[i+1], strings.Repeat(" ", descColumn)) {
			desc = lines[i+1]
		}
		out = append(out, described{name, firstClause(desc)})
	}
	return out
}

// firstClause is a help line's text up to its first colon, semicolon or
// parenthesis: what fits beside a candidate.
func firstClause(s string) string {
	s = strings.TrimSpace(s)
	for _, sep := range []string{": ", "; ", " ("} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	return strings.TrimSuffix(strings.TrimSpace(s), ",")
}

// descColumn is where usage's command descriptions start.
const descColumn = 20
