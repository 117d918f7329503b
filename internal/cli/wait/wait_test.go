package wait

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want waitTarget
		ok   bool
	}{
		{"claude/345104", waitTarget{"claude", 345104}, true},
		{"345104", waitTarget{"", 345104}, true},
		{"open-code_2/7", waitTarget{"open-code_2", 7}, true},
		{"claude/0", waitTarget{}, false},
		{"claude/-1", waitTarget{}, false},
		{"claude/x1", waitTarget{}, false},
		{"claude", waitTarget{}, false},
		{"/12", waitTarget{}, false},
		{"Claude/12", waitTarget{}, false},
		{"1claude/12", waitTarget{}, false},
		{"-x/12", waitTarget{}, false},
		{"c-/12", waitTarget{"c-", 12}, true},
		{"c_9/12", waitTarget{"c_9", 12}, true},
		{"cé/12", waitTarget{}, false},
		{"c d/12", waitTarget{}, false},
		{"a/b/12", waitTarget{}, false},
		{"", waitTarget{}, false},
	} {
		got, err := parseTarget(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseTarget(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func agent(h string, pid int, started int64, state, waiting string) client.Agent {
	return client.Agent{Harness: h, PID: pid, Started: started, State: state, Waiting: waiting}
}

// TestWaiter: which table ends a wait, for any agent, any of the AGENTs
// and all of them; a pid reused by another agent is not the AGENT.
func TestWaiter(t *testing.T) {
	cl := func(state string) client.Agent { return agent("claude", 10, 100, state, "") }
	cx := func(state string) client.Agent { return agent("codex", 20, 200, state, "") }
	reused := agent("claude", 10, 999, "idle", "") // pid 10 again, another start
	for _, tc := range []struct {
		name    string
		spec    waitSpec
		tables  [][]client.Agent
		verdict waitVerdict
		matched []string // HARNESS/PID of the last look
	}{
		{"any agent, already idle", waitSpec{states: []string{"waiting", "idle"}},
			[][]client.Agent{{cl("idle"), cx("working")}}, waitDone, []string{"claude/10"}},
		{"any agent, none yet", waitSpec{states: []string{"waiting"}},
			[][]client.Agent{{cl("idle"), cx("working")}, {cl("working"), cx("")}}, waitMore, nil},
		{"any agent, a new one", waitSpec{states: []string{"waiting"}},
			[][]client.Agent{{cl("working")}, {cl("working"), cx("waiting")}}, waitDone, []string{"codex/20"}},
		{"any agent, no agent at all", waitSpec{states: []string{"idle"}},
			[][]client.Agent{{}}, waitMore, nil},
		{"unknown state never counts", waitSpec{states: []string{"waiting", "idle", "working"}},
			[][]client.Agent{{cl("")}}, waitMore, nil},
		{"named, after a change", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}}},
			[][]client.Agent{{cl("working"), cx("idle")}, {cl("idle"), cx("idle")}}, waitDone, []string{"claude/10"}},
		{"named, another agent does not count", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}}},
			[][]client.Agent{{cl("working"), cx("idle")}}, waitMore, nil},
		{"named by pid alone", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"", 20}}},
			[][]client.Agent{{cl("idle"), cx("working")}, {cl("idle"), cx("idle")}}, waitDone, []string{"codex/20"}},
		{"any of two, one exits", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}, {"codex", 20}}},
			[][]client.Agent{{cl("working"), cx("working")}, {cx("working")}}, waitMore, nil},
		{"any of two, both exit", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}, {"codex", 20}}},
			[][]client.Agent{{cl("working"), cx("working")}, {cx("working")}, {}}, waitExited, nil},
		{"named, the pid reused", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}}},
			[][]client.Agent{{cl("working")}, {reused}}, waitExited, nil},
		{"all of two, one at a time", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}, {"codex", 20}}, allOf: true},
			[][]client.Agent{{cl("idle"), cx("working")}, {cl("working"), cx("idle")}}, waitMore, nil},
		{"all of two, together", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}, {"codex", 20}}, allOf: true},
			[][]client.Agent{{cl("idle"), cx("working")}, {cl("idle"), cx("idle")}}, waitDone, []string{"claude/10", "codex/20"}},
		{"all of two, one exits", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}, {"codex", 20}}, allOf: true},
			[][]client.Agent{{cl("idle"), cx("working")}, {cl("idle")}}, waitExited, nil},
	} {
		w := &waiter{spec: tc.spec}
		if err := w.first(tc.tables[0]); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var v waitVerdict
		var matched []client.Agent
		for _, tab := range tc.tables {
			v, matched, _ = w.look(tab)
			if v != waitMore {
				break
			}
		}
		var names []string
		for _, a := range matched {
			names = append(names, a.Harness+"/"+strconv.Itoa(a.PID))
		}
		if v != tc.verdict || !slices.Equal(names, tc.matched) {
			t.Errorf("%s: verdict %d %q, want %d %q", tc.name, v, names, tc.verdict, tc.matched)
		}
	}
	// An AGENT that is not live at the start is an error, named.
	w := &waiter{spec: waitSpec{targets: []waitTarget{{"claude", 10}, {"codex", 10}, {"", 30}}}}
	err := w.first([]client.Agent{cl("idle")})
	if err == nil || err.Error() != "no live agent codex/10, 30" {
		t.Errorf("missing AGENTs: %v", err)
	}
}

// tables is a cli.AgentWatch that gives its tables in turn, then the last
// one again, until ctx ends.
type tables struct {
	list  [][]client.Agent
	i     int
	err   error
	reads int
}

func (w *tables) Next(ctx context.Context) ([]client.Agent, error) {
	if w.reads > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	w.reads++
	if w.err != nil {
		return nil, w.err
	}
	t := w.list[min(w.i, len(w.list)-1)]
	w.i++
	return t, nil
}

func (w *tables) Close() {}

// TestWaitFor: what wait prints and its exit status, for each way a wait
// ends.
func TestWaitFor(t *testing.T) {
	waitingCl := agent("claude", 10, 1, "waiting", "approve Bash")
	for _, tc := range []struct {
		name    string
		spec    waitSpec
		w       *tables
		timeout time.Duration // 0: none
		once    bool
		quiet   bool
		code    int
		stdout  string
		stderr  string // a part of it
		reads   int    // 0: any
	}{
		{"at once", waitSpec{states: []string{"waiting"}}, &tables{list: [][]client.Agent{{waitingCl}}}, 0, false, false, 0,
			"claude/10 waiting approve Bash\n", "", 1},
		{"after a change", waitSpec{states: []string{"waiting"}, targets: []waitTarget{{"", 10}}},
			&tables{list: [][]client.Agent{{agent("claude", 10, 1, "working", "")}, {agent("claude", 10, 1, "working", "")}, {waitingCl}}},
			0, false, false, 0, "claude/10 waiting approve Bash\n", "", 3},
		{"quiet", waitSpec{states: []string{"waiting"}}, &tables{list: [][]client.Agent{{waitingCl}}}, 0, false, true, 0, "", "", 1},
		{"timeout", waitSpec{states: []string{"idle"}}, &tables{list: [][]client.Agent{{waitingCl}}}, 50 * time.Millisecond, false, false,
			124, "", "timed out: no agent idle", 0},
		{"timeout 0 looks once", waitSpec{states: []string{"idle", "working"}}, &tables{list: [][]client.Agent{{waitingCl}}}, 0, true, false,
			124, "", "timed out: no agent idle or working", 1},
		{"timeout 0, there", waitSpec{states: []string{"waiting"}}, &tables{list: [][]client.Agent{{waitingCl}}}, 0, true, false,
			0, "claude/10 waiting approve Bash\n", "", 1},
		{"exited", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 10}}}, &tables{list: [][]client.Agent{{waitingCl}, {}}},
			0, false, false, 3, "", "exited before it was idle: claude/10", 2},
		{"not there", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"claude", 11}}}, &tables{list: [][]client.Agent{{waitingCl}}},
			0, false, false, 1, "", "no live agent claude/11", 1},
		{"daemon error", waitSpec{states: []string{"idle"}}, &tables{err: errors.New("no harness \"x\"")},
			0, false, false, 1, "", "9harness wait: no harness \"x\"", 1},
		{"state unknown, said", waitSpec{states: []string{"idle"}, targets: []waitTarget{{"codex", 20}}},
			&tables{list: [][]client.Agent{{{Harness: "codex", PID: 20, StateVia: "none (approval is never on disk)"}}, {agent("codex", 20, 0, "idle", "")}}},
			0, false, false, 0, "codex/20 idle\n", "codex/20: the daemon cannot tell its state yet (none (approval is never on disk))", 2},
	} {
		ctx := context.Background()
		if tc.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			defer cancel()
		}
		var out, errb bytes.Buffer
		code := waitFor(ctx, tc.w, tc.spec, tc.once, tc.quiet, &out, &errb)
		if code != tc.code || out.String() != tc.stdout || !strings.Contains(errb.String(), tc.stderr) ||
			tc.stderr == "" && errb.Len() > 0 || tc.stderr != "" && strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.name, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
		if tc.reads > 0 && tc.w.reads != tc.reads {
			t.Errorf("%s: %d reads of the table, want %d", tc.name, tc.w.reads, tc.reads)
		}
	}
}

// TestWaitUsage: bad operands and flags are one line and exit 2, before
// the daemon is dialled; good ones reach the dial.
func TestWaitUsage(t *testing.T) {
	for _, args := range [][]string{
		{"wait", "--state", "busy"},
		{"wait", "--state", "idle,nope"},
		{"wait", "--timeout", "-1"},
		{"wait", "--timeout", "soon"},
		{"wait", "claude/x"},
		{"wait", "claude"},
		{"wait", "--all-of"},
		{"wait", "--nosuch"},
	} {
		var out, errs bytes.Buffer
		code := run(append([]string{"-s", "/nonexistent/sock"}, args[1:]...), &out, &errs)
		if code != cli.ExitUsage || out.Len() != 0 || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out.String(), errs.String())
		}
	}
	for _, args := range [][]string{
		{"wait"},
		{"wait", "--state", "idle", "--state=waiting,working", "--timeout", "5m", "claude/1", "2"},
		{"wait", "--all-of", "-q", "claude/1", "codex/2", "--harness", "claude,codex"},
	} {
		var out, errs bytes.Buffer
		code := run(append([]string{"-s", "/nonexistent/sock"}, args[1:]...), &out, &errs)
		if code != cli.ExitError || !strings.Contains(errs.String(), "cannot reach the daemon") {
			t.Errorf("%q: exit %d, stderr %q; want the dial to fail", args, code, errs.String())
		}
	}
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "usage: 9harness") {
		t.Errorf("wait --help: exit %d\n%s", code, out.String())
	}
	for _, f := range []string{"--state STATE", "--timeout D", "--all-of", "-q, --quiet", "--harness NAME", "-h, --help"} {
		if !strings.Contains(out.String(), "\n  "+f+" ") {
			t.Errorf("wait --help has no line for %s", f)
		}
	}
}

// run is `9harness wait ARGS`.
func run(args []string, stdout, stderr io.Writer) int {
	g := cli.NewGlobals("dev", map[string]string{"wait": Help})
	g.Cmd = "wait"
	return Run(g, args, stdout, stderr)
}
