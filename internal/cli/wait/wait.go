// Package wait is `9harness wait`: it waits until an agent of this
// machine, of one host or of several is in a turn state, and prints it.
package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
	"github.com/spf13/pflag"
)

// Help is the text of `9harness wait --help`.
const Help = `usage: 9harness [-s SOCKET | --ssh DEST] wait [--state STATE]... [--timeout D]
           [--all-of] [-q] [--harness NAME]... [AGENT...]
       9harness [--ssh DEST]... wait --all | --hosts FILE [--state STATE]...
           [--timeout D] [-q] [--harness NAME]...

Wait until an agent is in a turn state, and print it: at once if one
already is. With no AGENT, any live agent counts, one started later too;
with AGENTs (HARNESS/PID as ps -q prints it, or a PID alone), any of them,
or with --all-of all of them at the same moment.

The states are those of ps's STATE: waiting (it needs you: a permission,
a question), idle (its turn is over, it is at its prompt) and working.
By default wait returns on waiting or idle: when an agent needs you,
whether to answer it or to give it its next prompt. An agent whose state
the daemon cannot tell (ps shows -) never counts; for an AGENT, wait says
so on standard error, and goes on waiting.

Each agent in the state is printed on a line of its own, as
HARNESS/PID STATE [WHAT IT WAITS FOR]:

  claude/345104 waiting approve Bash

With --all (this machine and every host of the hosts file, see 9harness
help ps), --hosts FILE or several --ssh, it waits for any agent of any
of those hosts (no AGENTs), reading each host's table when it answers
and after each of its events, and prints the host's name (- for this
machine) in front of each line:

  build1 claude/345104 waiting approve Bash

A host that does not answer within 5 s, or is lost, is one line on
standard error, and is dialled again, as events --all does.

Options:
  --state STATE      return on STATE: waiting, idle or working; repeatable,
                     or a comma separated list (default waiting,idle)
  --timeout D        give up after D: 90s, 5m, 1h30m, or seconds (30);
                     0 looks once and does not wait
  --all-of           return only when every AGENT is in the state, all at
                     once (needs AGENTs)
  -q, --quiet        print nothing: the exit status says it
  --harness NAME     only the agents of harness NAME; repeatable, or a comma
                     separated list
  --all              this machine and every host of the hosts file
  --hosts FILE       the hosts of FILE (with --all: instead of
                     ~/.config/9harness/hosts)
  -h, --help         this text

It reads the daemon's /active/table once, and again each time the
daemon's /active/events reports a change (an older daemon without it:
four times a second).

Exit status: 0 when an agent is in the state (with --all-of, every AGENT);
1 when an AGENT is not a live agent when wait starts, or the daemon cannot
be reached, with one line on standard error; 2 for a usage error; 3 when
the AGENTs exited before any was in the state (with --all-of, when any of
them exited), or when the timeout ran out while a host of --all was
down; 124 when the timeout ran out first.

Examples:
  9harness wait claude/345104 && notify-send 'claude needs you'
  9harness wait --state idle --timeout 10m 345104 51234
  9harness wait --state waiting --timeout 0 -q && echo 'someone needs you'
  9harness wait --all-of --state idle claude/345104 codex/51234
`

// waitStates are the states wait may wait for.
var waitStates = []string{"waiting", "idle", "working"}

// waitTarget is an AGENT operand: harness "" matches any harness.
type waitTarget struct {
	harness string
	pid     int
}

func (t waitTarget) String() string {
	if t.harness == "" {
		return strconv.Itoa(t.pid)
	}
	return t.harness + "/" + strconv.Itoa(t.pid)
}

// isHarnessName reports whether h is shaped like a harness's name:
// ^[a-z][a-z0-9_-]*$ (a function, not a regexp compiled at every start of
// every command).
func isHarnessName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || i > 0 && ('0' <= c && c <= '9' || c == '_' || c == '-')) {
			return false
		}
	}
	return h != ""
}

// parseTarget reads HARNESS/PID or PID.
func parseTarget(s string) (waitTarget, error) {
	h, p, ok := strings.Cut(s, "/")
	if !ok {
		h, p = "", s
	} else if !isHarnessName(h) {
		return waitTarget{}, fmt.Errorf("bad agent %q: want HARNESS/PID or PID", s)
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return waitTarget{}, fmt.Errorf("bad agent %q: want HARNESS/PID or PID", s)
	}
	return waitTarget{h, pid}, nil
}

// waitSpec is what a wait waits for.
type waitSpec struct {
	states  []string
	targets []waitTarget
	allOf   bool
}

// waitVerdict is one look at the table.
type waitVerdict int

const (
	waitMore   waitVerdict = iota // not yet
	waitDone                      // the condition holds: print matched
	waitExited                    // it never can: the AGENTs are gone
)

// waiter decides, table after table, whether a wait is over. It pins each
// AGENT to the agent it names at the first look (its harness and start
// time), so that a pid reused by another agent is not taken for it.
type waiter struct {
	spec   waitSpec
	pinned []client.Agent // the AGENTs as first seen, in operand order
}

// first resolves the AGENTs in the first table; an AGENT that is not there
// is an error.
func (w *waiter) first(agents []client.Agent) error {
	var missing []string
	for _, t := range w.spec.targets {
		i := slices.IndexFunc(agents, func(a client.Agent) bool {
			return a.PID == t.pid && (t.harness == "" || a.Harness == t.harness)
		})
		if i < 0 {
			missing = append(missing, t.String())
			continue
		}
		w.pinned = append(w.pinned, agents[i])
	}
	if len(missing) > 0 {
		return fmt.Errorf("no live agent %s", strings.Join(missing, ", "))
	}
	return nil
}

// look judges one table: the agents in the state (the AGENTs in operand
// order, or every agent in the table's), and the AGENTs that are gone.
func (w *waiter) look(agents []client.Agent) (v waitVerdict, matched []client.Agent, gone []client.Agent) {
	in := func(a client.Agent) bool { return slices.Contains(w.spec.states, a.State) }
	if len(w.spec.targets) == 0 {
		for _, a := range agents {
			if in(a) {
				matched = append(matched, a)
			}
		}
		if len(matched) > 0 {
			return waitDone, matched, nil
		}
		return waitMore, nil, nil
	}
	byKey := map[cli.AgentKey]client.Agent{}
	for _, a := range agents {
		byKey[cli.KeyOf(a)] = a
	}
	for _, p := range w.pinned {
		a, ok := byKey[cli.KeyOf(p)]
		switch {
		case !ok:
			gone = append(gone, p)
		case in(a):
			matched = append(matched, a)
		}
	}
	switch {
	case w.spec.allOf && len(matched) == len(w.pinned):
		return waitDone, matched, nil
	case w.spec.allOf && len(gone) > 0:
		return waitExited, nil, gone
	case !w.spec.allOf && len(matched) > 0:
		return waitDone, matched, nil
	case !w.spec.allOf && len(gone) == len(w.pinned):
		return waitExited, nil, gone
	}
	return waitMore, nil, nil
}

// waitLine is how wait prints an agent in the state.
func waitLine(a client.Agent) string {
	s := fleet.Printable(a.Harness) + "/" + strconv.Itoa(a.PID) + " " + fleet.Printable(a.State)
	if a.Waiting != "" {
		s += " " + fleet.Printable(a.Waiting)
	}
	return s
}

// options are wait's flags.
type options struct {
	spec      waitSpec
	timeout   time.Duration
	quiet     bool
	harnesses []string
	ff        *fleet.Flags
}

// flagSet is wait's flags, each set into o.
func (o *options) flagSet(g *cli.Globals) *pflag.FlagSet {
	fs := g.FlagSet("wait")
	fs.Func("state", "", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(waitStates, s) {
				return fmt.Errorf("no state %q (waiting, idle, working)", s)
			}
			if !slices.Contains(o.spec.states, s) {
				o.spec.states = append(o.spec.states, s)
			}
		}
		return nil
	})
	fs.Func("timeout", "", func(v string) error {
		d, err := cli.ParseTimeout(v)
		o.timeout = d
		return err
	})
	fs.BoolVar(&o.spec.allOf, "all-of", false, "")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "")
	cli.AddHarnessFlag(fs, &o.harnesses)
	o.ff = cli.AddFleetFlags(fs)
	return fs
}

// Run is `9harness wait`.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := o.flagSet(g)
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	fleetMode := o.ff.All || fs.Changed("hosts") || len(g.SSHDests) > 1
	if fleetMode && len(rest) > 0 {
		fmt.Fprintln(stderr, "9harness wait: --all, --hosts and several --ssh wait for any agent, and take no AGENTs (try '9harness wait --help')")
		return cli.ExitUsage
	}
	for _, r := range rest {
		t, err := parseTarget(r)
		if err != nil {
			fmt.Fprintf(stderr, "9harness wait: %v (try '9harness wait --help')\n", err)
			return cli.ExitUsage
		}
		if !slices.Contains(o.spec.targets, t) {
			o.spec.targets = append(o.spec.targets, t)
		}
	}
	if o.spec.allOf && len(o.spec.targets) == 0 {
		fmt.Fprintln(stderr, "9harness wait: --all-of needs AGENTs (try '9harness wait --help')")
		return cli.ExitUsage
	}
	if len(o.spec.states) == 0 {
		o.spec.states = []string{"waiting", "idle"}
	}
	ctx := context.Background()
	if fs.Changed("timeout") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	once := fs.Changed("timeout") && o.timeout == 0
	if fleetMode {
		return runFleetWait(ctx, g, *o.ff, fs.Changed("hosts"), o.spec, o.harnesses, once, o.quiet, stdout, stderr)
	}
	c, status := g.Connect(stderr)
	if c == nil {
		return status
	}
	w := cli.NewEventWatch(g, c, o.harnesses)
	defer w.Close()
	return waitFor(ctx, w, o.spec, once, o.quiet, stdout, stderr)
}

// waitFor is wait's loop over the tables the watch gives; once says to
// look at one table only (--timeout 0).
func waitFor(ctx context.Context, watch cli.AgentWatch, spec waitSpec, once, quiet bool, stdout, stderr io.Writer) int {
	wt := &waiter{spec: spec}
	what := strings.Join(spec.states, " or ")
	for n := 0; ; n++ {
		// The first read is not cut short by a zero timeout: it is the look.
		rctx := ctx
		if once {
			rctx = context.Background()
		}
		agents, err := watch.Next(rctx)
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s\n", what)
			return cli.ExitTimeout
		}
		if err != nil {
			fmt.Fprintf(stderr, "9harness wait: %v\n", err)
			return cli.ExitError
		}
		if n == 0 {
			if err := wt.first(agents); err != nil {
				fmt.Fprintf(stderr, "9harness wait: %v\n", err)
				return cli.ExitError
			}
			// An AGENT whose state the daemon cannot tell yet would make
			// a silent wait that may never end: say why, once.
			for _, a := range wt.pinned {
				if a.State == "" && !quiet {
					why := ""
					if a.StateVia != "" {
						why = " (" + fleet.Printable(a.StateVia) + ")"
					}
					fmt.Fprintf(stderr, "9harness wait: %s/%d: the daemon cannot tell its state yet%s; it counts once it can\n", fleet.Printable(a.Harness), a.PID, why)
				}
			}
		}
		v, matched, gone := wt.look(agents)
		switch v {
		case waitDone:
			if quiet {
				return cli.ExitOK
			}
			out := cli.NewErrWriter(stdout)
			for _, a := range matched {
				fmt.Fprintln(out, waitLine(a))
			}
			if out.Report(stderr, "wait") {
				return cli.ExitError
			}
			return cli.ExitOK
		case waitExited:
			var names []string
			for _, a := range gone {
				names = append(names, fleet.Printable(a.Harness)+"/"+strconv.Itoa(a.PID))
			}
			fmt.Fprintf(stderr, "9harness wait: exited before it was %s: %s\n", what, strings.Join(names, ", "))
			return cli.ExitPartial
		}
		if once {
			fmt.Fprintf(stderr, "9harness wait: timed out: no agent %s\n", what)
			return cli.ExitTimeout
		}
	}
}
