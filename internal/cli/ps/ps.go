// Package ps is 9harness ps: the live agents of one machine or of several,
// as a table fitted to the terminal, JSON, names or a template; --watch
// redraws the table, and --notify runs a command for each agent that starts
// waiting. Its files: ps.go the command line, table.go the columns,
// format.go --format and --json, sort.go --sort, watch.go --watch,
// notify.go --notify, fleet.go and progress.go several hosts.
package ps

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
	"github.com/spf13/pflag"
)

// Help is ps --help.
const Help = `usage: 9harness [-s SOCKET | --ssh DEST] ps [-qrv] [--json | --format TEMPLATE]
           [--sort KEY] [--no-header] [--no-trunc] [--detached]
           [--watch [--notify CMD]] [--harness NAME]...
           [--all] [--hosts FILE] [--timeout D]

List the live AI coding agents, one row per agent, sorted by harness, then
pid (or as --sort says), as the daemon's /active tree shows them:

  HARNESS   claude, codex, omp, pi, hermes, dsh, gemini, opencode, qwen or kilo
  PID       the agent's process id
  AGE       how long it has run: 45s, 12m, 3h, 2d
  STATE     the turn: working, idle (at its prompt) or waiting (it needs
            you: a permission, a question); a waiting agent shows what it
            waits for, as "waiting: approve Bash", where the harness says
  TOKENS    the size of its context now: the tokens of the newest model
            call's prompt (input and cache), 41k = 41,000, 1.2M =
            1,200,000; where the harness records it
  LIMITS    the fullest subscription window the harness records (Codex's
            5-hour and weekly windows): its length and the share used,
            as 5h 82% or 7d 40%
  STATUS    what the harness itself publishes (Claude: busy, idle, ...)
  CWD       its working directory, your $HOME shown as ~ (not with --ssh)
  REACH     who can answer it: zmx or tmux (attach to its session), tty
            (a terminal that something else still holds: a window, an
            ssh session) or detached (no terminal, or one nobody else
            holds, and no session host: nobody can; 9harness move
            HARNESS/PID zmx NAME rescues it)
  ZMX/TMUX  the zmx or tmux session it runs in, as zmx:NAME or tmux:NAME;
            attach:ID for a Claude background session (claude attach ID)
  VIA       how its session was found, in one word: registry, fd, dir,
            argv, transcript, none or ambiguous; with -v, the daemon's
            whole note on it
  TITLE     the session's title, where the harness records one

A fact the daemon does not know is shown as -. Control characters in a
value are shown as ?. A TITLE the daemon has not derived yet shows as
(pending): the first read of many agents after the daemon starts (socket
activation) leaves the titles it has no time for to be derived after it,
and a later read shows them; --json names such facts under "pending".

On a terminal the table is fitted to its width, emoji and East Asian
characters counted as the two cells they take. TOKENS and LIMITS are left
out when no agent has one, STATUS when every agent's only repeats its
STATE (Claude's busy, idle, waiting), and REACH when every agent's only
repeats its ZMX/TMUX. Width is given up first by VIA (only -v's
note; a route word stays whole), then by CWD (which keeps its end), then
by TITLE down to 24 cells, and only then by STATE (what a waiting agent
waits for; "waiting" stays), each marked with …. When the table does not
fit with TITLE at 24 cells, CWD at 12 and STATE whole (from 80 columns up;
below, at 8), whole columns are left out, in this order:

  VIA, STATUS, LIMITS, AGE, TOKENS, ZMX/TMUX, REACH, CWD, STATE

HARNESS, PID and TITLE always stay. Written to a pipe or a file, or with
--no-trunc, nothing is shortened or left out (9harness ps | cat shows every
row whole).

Several machines in one table: with --all (this machine and every host of
the hosts file), --hosts FILE (that file's hosts) or --ssh given more than
once, every host is asked in parallel, each through one ssh running
"9harness relay" there, and a HOST column comes first: the host's name as
written in the file or after --ssh, - for this machine. Rows are sorted by
host, then as --sort says. A host that does not answer within --timeout is
one line on standard error naming it and why; the others are still
listed, and the exit status is 3.

The hosts file, $XDG_CONFIG_HOME/9harness/hosts (default
~/.config/9harness/hosts), has one host a line, # starts a comment:

  [user@]host[:port] [socket=PATH] [ssh-cmd=CMD] [ssh-opt=OPTION]... [forward=no]

socket= is the daemon's socket there, ssh-cmd= the remote command (quote
a value with blanks: ssh-cmd='~/go/bin/9harness relay'), ssh-opt= an ssh -o
option, repeatable; --ssh-opt and --ssh-cmd on the command line apply to
every host, ahead of the file's. A line that cannot be read is an error
naming FILE:LINE. By default 9harness starts no ssh connection that
outlives it (ControlMaster=no; an existing master is used). To keep one
warm from call to call, a host's ssh-opt says so, and it wins:
ssh-opt=ControlMaster=auto ssh-opt=ControlPath=~/.ssh/9h-%C
ssh-opt=ControlPersist=60. Through such a master, once a host has
answered, its daemon's socket is forwarded and later calls start no ssh
at all (--ssh-forward in 9harness --help; forward=no keeps a host on the
relay).

Options:
  --all              list this machine and every host of the hosts file
                     (and each --ssh DEST)
  --hosts FILE       read the hosts from FILE, and list them (with --all,
                     this machine too)
  --timeout D        how long to wait for each host: 5s (the default),
                     1m, or seconds (3)
  --json             print one JSON array with an object per agent, every
                     fact the tree has: harness, pid, ppid, started (unix
                     seconds; also started_at, RFC 3339 UTC), cwd, name, title, session, model, via,
                     status, state, waiting, since (when it entered the
                     state, RFC 3339 UTC), state.via (how the state was
                     found, or why it is not known; also state_via, which
                     jq and templates can name), zmx, tmux, transcript
                     (the transcript's path in the tree), agents (the
                     names of its sub-agents), tokens (an object:
                     context, input, output, cache_read, cache_write),
                     limits (an object of windows, Codex's primary and
                     secondary, each with used_percent, window_minutes
                     and resets_at, RFC 3339 UTC) and reach (zmx, tmux,
                     tty or detached). A
                     fact the daemon does not know is left out; zmx and
                     tmux are always there, "" when the agent is in no such
                     session. pending (an array) names the facts not yet
                     derived when the daemon made the table: title and
                     model are then left out, tokens holds the context
                     alone; a later read has them. These keys are stable: they are those of the
                     daemon's /active/table (one JSON object per line, one
                     line per agent), which ps reads in one open; from a
                     daemon without that file, ps reads every agent's
                     directory instead. Over several machines each
                     object starts with "host", as HOST shows it.
  --format TEMPLATE  print one line per agent from the Go text/template
                     TEMPLATE, over the --json fields by their JSON names
                     ({{.harness}}, {{.pid}}, {{.title}}, {{.state}},
                     {{.waiting}}, {{.host}}, ...), with {{.state_via}}
                     for state.via and {{.tokens.context}} (input, output,
                     cache_read, cache_write) for a count; {{.host}} is
                     the host's name, - for this machine; a fact the daemon does not
                     know is "" (0 for numbers), and control characters
                     are shown as ?. As docker's: \t and \n are a tab
                     and a newline; 'table TEMPLATE' adds a header (each
                     field's name in capitals) and aligns the columns at
                     the tabs; the functions json, join, lower and upper
                     ({{json .}} is the whole agent); --format json prints
                     one JSON object per agent per line. A template that
                     does not parse or names no such field is a usage
                     error.
  -q, --quiet        print only each agent's HARNESS/PID, one per line: the
                     name 9harness move takes (HOST:HARNESS/PID for a
                     remote agent of several machines)
  --sort KEY         order the agents by KEY: harness (the default: by
                     harness, then pid), pid, age (youngest first), cwd,
                     title or status (alphabetical), state (waiting, then
                     idle, then working) or tokens (the largest context
                     first); ties go by harness, then pid, and a fact the
                     daemon does not know sorts last
  --detached         only the agents nobody can answer (REACH detached):
                     left running after their terminal closed, started by
                     a script or nohup; 9harness move puts one in zmx or
                     tmux. With --all or --hosts, those of every host
  -r, --reverse      reverse the order, whatever the key
  -v, --wide         VIA shows the daemon's whole note, not only its first
                     word
  --no-header        leave out the header line
  --no-headers       the same, as kubectl and procps spell it
  --no-trunc         on a terminal too, shorten nothing and leave no column
                     out (a long row wraps)
  --harness NAME     only the agents of harness NAME; repeatable, or a comma
                     separated list (--harness claude,codex)
  --watch            redraw the table every second, like watch(1), until
                     Ctrl-C; standard output must be a terminal (but see
                     --notify); not with --json, --format or -q
  -n, --interval D   with --watch, redraw every D instead: 2, 0.5, 5s
                     (200ms at least: each frame reads the whole table)
  --notify CMD       with --watch: run CMD through /bin/sh -c each time an
                     agent starts waiting (once per wait: not again while
                     it stays waiting; an agent already waiting when the
                     watch starts counts), with the agent's facts in the
                     environment only, never in CMD's words:
                       HARNESS_NAME     the harness: claude, codex, ...
                       HARNESS_PID      its pid
                       HARNESS_STATE    waiting
                       HARNESS_WAITING  what it waits for, or empty
                       HARNESS_CWD      its working directory
                       HARNESS_TITLE    its title, or empty
                       HARNESS_HOST     the --ssh DEST, else this host's
                                        short name
                     (control characters in a value are shown as ?); use
                     them quoted: "$HARNESS_TITLE". Off a terminal no table
                     is drawn: ps --watch --notify CMD runs in the
                     background or as a service, until killed. CMD's output
                     goes to standard error, or nowhere under a drawn table
  -h, --help         this text

Exit status: 0 when listed; 1 when the daemon cannot be reached (over
several machines: none of them) or the output cannot be written, with one
line on standard error; 2 for a usage error (a bad flag, sort key,
template or hosts file); 3 when some hosts did not answer and the others
were listed.

Examples:
  9harness ps
  9harness ps --harness codex --sort age
  9harness ps --watch --harness claude
  9harness ps --sort state
  9harness ps --watch --notify 'notify-send -- "$HARNESS_NAME/$HARNESS_PID" "$HARNESS_WAITING"'
  9harness --ssh build1 ps
  9harness ps --all --timeout 3s
  9harness ps --json --ssh build1 --ssh alice@build2:2222 | jq -r '.[].host'
  9harness ps -q --harness claude
  9harness ps --detached
  9harness ps --format '{{.harness}}/{{.pid}} {{.session}}'
  9harness ps --format 'table {{.harness}}\t{{.pid}}\t{{.state}}'
  9harness ps --json | jq -r '.[] | select(.zmx == "" and .tmux == "") | .cwd'
`

type psOptions struct {
	json, watch, quiet bool
	wide, reverse      bool
	noHeader, noTrunc  bool
	sortKey            string
	format             *template.Template
	formatTable        bool // --format 'table ...': a header, columns aligned
	formatJSON         bool // --format json: one JSON object per line
	harnesses          []string
	detached           bool          // only the agents whose reach is detached
	notify             string        // --notify's shell command
	interval           time.Duration // --watch's period (-n)
}

// The --watch period: watch(1)'s default, and a floor because every frame
// is a whole table read, which at hundreds of agents costs the daemon
// real work.
const (
	defaultInterval = time.Second
	minInterval     = 200 * time.Millisecond
)

// keep is the agents the options list: with --detached, only those
// nobody can answer.
func (o psOptions) keep(agents []client.Agent) []client.Agent {
	if !o.detached {
		return agents
	}
	return slices.DeleteFunc(agents, func(a client.Agent) bool { return a.Reach != "detached" })
}

// keepRows is keep for a fleet's rows: each host's detached agents.
func (o psOptions) keepRows(rows []fleet.Row) []fleet.Row {
	if !o.detached {
		return rows
	}
	return slices.DeleteFunc(rows, func(r fleet.Row) bool { return r.Reach != "detached" })
}

// period is --watch's period.
func (o psOptions) period() time.Duration {
	if o.interval <= 0 {
		return defaultInterval
	}
	return o.interval
}

// Run is 9harness ps: the live agents of this machine, of the --ssh host,
// or of several (--all, --hosts, more than one --ssh).
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	var o psOptions
	fs, ff := psFlags(g, &o)
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	term, _ := stdout.(*os.File)
	if term != nil && !cli.IsTerminal(term) {
		term = nil
	}
	fleetMode := ff.All || fs.Changed("hosts") || len(g.SSHDests) > 1
	if msg := o.usageError(fs, rest, term != nil, fleetMode, ff.Timeout); msg != "" {
		fmt.Fprintln(stderr, "9harness ps: "+msg)
		return cli.ExitUsage
	}
	if fleetMode {
		return runFleetPs(g, o, *ff, fs.Changed("hosts"), term, stdout, stderr)
	}
	return runLocalPs(g, o, term, stdout, stderr)
}

// psFlags is ps's FlagSet, filling o and the fleet flags it returns.
func psFlags(g *cli.Globals, o *psOptions) (*pflag.FlagSet, *fleet.Flags) {
	fs := g.FlagSet("ps")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.watch, "watch", false, "")
	o.interval = defaultInterval
	fs.FuncP("interval", "n", "", func(v string) error {
		d, err := cli.ParseTimeout(v)
		if err == nil && d < minInterval {
			err = fmt.Errorf("%s is below the %v minimum", v, minInterval)
		}
		o.interval = d
		return err
	})
	ff := cli.AddFleetFlags(fs)
	fs.Func("timeout", "", func(v string) error {
		d, err := cli.ParseTimeout(v)
		ff.Timeout = d
		return err
	})
	fs.StringVar(&o.notify, "notify", "", "")
	cli.AddHarnessFlag(fs, &o.harnesses)
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "")
	fs.BoolVarP(&o.reverse, "reverse", "r", false, "")
	fs.BoolVarP(&o.wide, "wide", "v", false, "")
	fs.BoolVar(&o.noHeader, "no-header", false, "")
	// kubectl's and procps's spelling.
	fs.BoolVar(&o.noHeader, "no-headers", false, "")
	fs.BoolVar(&o.noTrunc, "no-trunc", false, "")
	fs.BoolVar(&o.detached, "detached", false, "")
	fs.Func("sort", "", func(v string) error {
		if _, ok := psSortKeys[v]; !ok {
			return fmt.Errorf("no sort key %q (harness, pid, age, cwd, title, status, state, tokens)", v)
		}
		o.sortKey = v
		return nil
	})
	fs.Func("format", "", o.setFormat)
	return fs, ff
}

// usageError is what is wrong with ps's command line once parsed ("" if
// nothing): an operand, outputs that exclude each other, a flag without
// the one it serves.
func (o psOptions) usageError(fs *pflag.FlagSet, rest []string, onTerm, fleetMode bool, timeout time.Duration) string {
	if len(rest) > 0 {
		return fmt.Sprintf("unexpected argument %q (try '9harness ps --help')", rest[0])
	}
	var outputs []string
	for _, f := range []string{"json", "format", "quiet"} {
		if fs.Changed(f) {
			outputs = append(outputs, "--"+f)
		}
	}
	switch {
	case len(outputs) > 1:
		return strings.Join(outputs, " and ") + " do not go together"
	case fs.Changed("interval") && !o.watch:
		return "-n/--interval is --watch's period"
	case o.watch && len(outputs) > 0:
		return "--watch draws the table; " + outputs[0] + " does not go with it"
	case fs.Changed("notify") && !o.watch:
		return "--notify runs with --watch"
	case fs.Changed("notify") && strings.TrimSpace(o.notify) == "":
		return "--notify needs a command"
	case o.watch && !onTerm && o.notify == "":
		return "--watch redraws a terminal, and standard output is not one"
	case fs.Changed("timeout") && (!fleetMode || timeout <= 0):
		return "--timeout is a positive duration for --all, --hosts or several --ssh"
	case fleetMode && o.notify != "":
		return "--notify watches one machine, not --all, --hosts or several --ssh"
	}
	return ""
}

// runLocalPs is ps of one machine: this one, or the --ssh host.
func runLocalPs(g *cli.Globals, o psOptions, term *os.File, stdout, stderr io.Writer) int {
	home := ""
	if !g.Remote() {
		home = os.Getenv("HOME")
	}
	c, status := g.Connect(stderr)
	if c == nil {
		return status
	}
	if o.watch && o.notify != "" {
		return watchNotify(g, c, o, home, term, stderr)
	}
	if o.watch {
		return watchPs(g, c, o, home, term, nil)
	}
	defer c.Close()
	agents, err := c.Agents(o.harnesses...)
	if err != nil {
		fmt.Fprintf(stderr, "9harness ps: %v\n", fleet.Describe(err))
		return cli.ErrStatus(err)
	}
	agents = o.keep(agents)
	sortAgents(agents, o.sortKey, o.reverse)
	return psListing{
		agents: agents,
		json:   agents,
		name:   func(i int) string { return fleet.Printable(agents[i].Harness) + "/" + strconv.Itoa(agents[i].PID) },
		host:   func(int) string { return cmp.Or(g.SSHDest, "-") },
		table:  func(lay psLayout) []string { return psTable(agents, time.Now(), home, lay) },
	}.print(o, term, stdout, stderr)
}

// psListing is what ps prints, one machine's listing or a fleet's: the
// agents in their order, and how each output shows them.
type psListing struct {
	agents []client.Agent
	json   any                     // what --json encodes
	name   func(i int) string      // -q's line for agents[i]
	host   func(i int) string      // --format's .host for agents[i]
	table  func(psLayout) []string // the table, header first
}

// print writes the listing as o asks, in one write: cli.ExitOK, or the status
// of a failure it has said on stderr.
func (l psListing) print(o psOptions, term *os.File, stdout, stderr io.Writer) int {
	b := new(bytes.Buffer)
	switch {
	case o.json:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(l.json); err != nil {
			fmt.Fprintf(stderr, "9harness ps: %v\n", err)
			return cli.ExitError
		}
	case o.quiet:
		for i := range l.agents {
			fmt.Fprintf(b, "%s\n", l.name(i))
		}
	case o.formatJSON:
		for i, a := range l.agents {
			fields := psFields(a)
			fields["host"] = l.host(i)
			line, err := json.Marshal(fields)
			if err != nil {
				fmt.Fprintf(stderr, "9harness ps: %v\n", err)
				return cli.ExitError
			}
			b.Write(line)
			b.WriteByte('\n')
		}
	case o.format != nil:
		if status := l.printFormat(o, b, stderr); status != cli.ExitOK {
			return status
		}
	default:
		lay := psLayout{wide: o.wide, noHeader: o.noHeader}
		if term != nil && !o.noTrunc {
			lay.width, _ = fleet.TermSize(term)
		}
		lines := l.table(lay)
		n := 0
		for _, line := range lines {
			n += len(line) + 1
		}
		// Sized at once: growing a Buffer clears and copies.
		b = bytes.NewBuffer(make([]byte, 0, n))
		for _, line := range lines {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if _, err := stdout.Write(b.Bytes()); err != nil {
		fmt.Fprintf(stderr, "9harness ps: write error: %v\n", cli.UnwrapSyscall(err))
		return cli.ExitError
	}
	return cli.ExitOK
}

// setFormat takes --format as docker does: json, table (the table ps
// draws anyway), 'table TEMPLATE', or a TEMPLATE.
func (o *psOptions) setFormat(v string) error {
	switch v {
	case "json":
		o.formatJSON = true
		return nil
	case "table":
		return nil
	}
	text, table := strings.CutPrefix(v, "table")
	if table && text != "" && text[0] != ' ' && text[0] != '\t' && !strings.HasPrefix(text, `\t`) {
		text, table = v, false // a template that starts with the word
	}
	o.formatTable = table
	t, err := psTemplate(strings.TrimLeft(text, " "))
	o.format = t
	return err
}

// printFormat writes a line per agent from the --format template; for
// 'table ...', a header first and the columns aligned at the tabs.
func (l psListing) printFormat(o psOptions, b *bytes.Buffer, stderr io.Writer) int {
	var w io.Writer = b
	var tw *tabwriter.Writer
	if o.formatTable {
		// docker's table: columns three spaces apart.
		tw = tabwriter.NewWriter(b, 10, 1, 3, ' ', 0)
		w = tw
	}
	if tw != nil && !o.noHeader {
		// Every agent has the same keys; a header that a function cannot
		// take (printf "%d" of a name) is left out.
		fields := psFields(client.Agent{})
		fields["host"] = ""
		var h bytes.Buffer
		if err := o.format.Execute(&h, formatHeader(fields)); err == nil {
			h.WriteByte('\n')
			w.Write(h.Bytes())
		}
	}
	for i, a := range l.agents {
		fields := psFields(a)
		fields["host"] = l.host(i)
		if err := o.format.Execute(w, fields); err != nil {
			fmt.Fprintf(stderr, "9harness ps: --format: %v\n", err)
			return cli.ExitUsage
		}
		io.WriteString(w, "\n")
	}
	if tw != nil {
		tw.Flush()
	}
	return cli.ExitOK
}

// layout is the table's layout on a terminal cols wide: with --no-trunc,
// no column is cut (each line still is, at the edge, by drawFrame).
func (o psOptions) layout(cols int) psLayout {
	lay := psLayout{width: cols, wide: o.wide, noHeader: o.noHeader}
	if o.noTrunc {
		lay.width = 0
	}
	return lay
}
