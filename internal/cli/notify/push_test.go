package notify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

func TestPushConfigParse(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("secret\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, err := parsePushConfig("n.conf", strings.NewReader(strings.Join([]string{
		"# comment",
		"",
		"on waiting exit",
		"idle-after 90s",
		"harness claude codex",
		"target ntfy url=https://ntfy.example/ topic=me token-file=" + tok + " priority=5",
		"target ntfy topic=me name=public",
		"target webhook url=http://127.0.0.1:9/x",
		"target desktop",
		`target command notify-send "$HARNESS_NAME" x=y`,
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.on, []string{"waiting", "exit"}) || cfg.idleAfter != 90*time.Second || !slices.Equal(cfg.harnesses, []string{"claude", "codex"}) {
		t.Errorf("settings: %+v", cfg)
	}
	var names []string
	for _, t := range cfg.targets {
		names = append(names, t.name)
	}
	if want := []string{"https://ntfy.example/me", "public", "http://127.0.0.1:9/x", "desktop", `command notify-send "$HARNESS_NAME" x=y`}; !slices.Equal(names, want) {
		t.Errorf("target names %q, want %q", names, want)
	}
	if c := cfg.targets[0]; c.token != "secret" || c.priority != 5 || c.url != "https://ntfy.example/" {
		t.Errorf("ntfy target %+v", c)
	}
	if c := cfg.targets[1]; c.url != "https://ntfy.sh" || c.token != "" {
		t.Errorf("default ntfy target %+v", c)
	}
	if c := cfg.targets[4]; c.cmd != `notify-send "$HARNESS_NAME" x=y` {
		t.Errorf("command %q", c.cmd)
	}
	if s := cfg.targets[0].String(); strings.Contains(s, "secret") {
		t.Errorf("a target's name shows its token: %s", s)
	}
	// The defaults.
	cfg, err = parsePushConfig("n.conf", strings.NewReader("target desktop\n"))
	if err != nil || !slices.Equal(cfg.on, pushKinds) || cfg.idleAfter != time.Minute {
		t.Errorf("defaults: %+v %v", cfg, err)
	}

	t.Setenv("CREDENTIALS_DIRECTORY", "")
	for _, c := range []struct{ conf, want string }{
		{"", "n.conf: no target"},
		{"# only\n", "n.conf: no target"},
		{"target desktop\nbogus 1\n", `n.conf:2: unknown setting "bogus"`},
		{"on\ntarget desktop\n", "n.conf:1: on names at least one"},
		{"on waiting napping\n", `n.conf:1: on: unknown transition "napping"`},
		{"on waiting\non exit\n", "n.conf:2: on given again (first on line 1)"},
		{"idle-after soon\n", `n.conf:1: idle-after: "soon" is not a duration`},
		{"idle-after -1s\n", `n.conf:1: idle-after: "-1s" is not a duration`},
		{"target\n", "n.conf:1: target needs a kind"},
		{"target pigeon\n", `n.conf:1: unknown target kind "pigeon"`},
		{"target ntfy url=https://x\n", "n.conf:1: target ntfy needs topic=NAME"},
		{"target ntfy topic=a priority=9\n", "n.conf:1: priority=9: want 1 to 5"},
		{"target ntfy topic=a colour=red\n", `n.conf:1: target ntfy takes url=, topic=, priority=, token-file=, token-credential=, name=, not "colour"`},
		{"target ntfy topic=a topic=b\n", "n.conf:1: topic= given twice"},
		{"target ntfy topic=a oops\n", `n.conf:1: "oops" is not KEY=VALUE`},
		{"target webhook\n", "n.conf:1: target webhook needs url=URL"},
		{"target webhook url=ftp://x/\n", "n.conf:1: url=ftp://x/: want an http:// or https:// URL"},
		{"target webhook url=https://u:p@x/\n", "n.conf:1: url= holds a user or password"},
		{"target command\n", "n.conf:1: target command needs the command"},
		{"target desktop\ntarget desktop\n", `n.conf:2: a second target named "desktop" (the first is on line 1)`},
		{"\n\ntarget ntfy topic=a token-file=" + loose + "\n", "n.conf:3: token-file " + loose + " has mode 0640: others may read it; chmod 600 it"},
		{"target ntfy topic=a token-file=" + dir + "/absent\n", "n.conf:1: token-file " + dir + "/absent: no such file or directory"},
		{"target ntfy topic=a token-file=" + dir + "\n", "n.conf:1: token-file " + dir + " is not a regular file"},
		{"target ntfy topic=a token-credential=tok\n", "n.conf:1: token-credential=tok: $CREDENTIALS_DIRECTORY is not set"},
		{"target ntfy topic=a token-credential=../tok\n", "n.conf:1: token-credential=../tok: a credential's name has no /"},
		{"target ntfy topic=a token-file=" + tok + " token-credential=x\n", "n.conf:1: token-file= and token-credential= are one or the other"},
	} {
		_, err := parsePushConfig("n.conf", strings.NewReader(c.conf))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.conf, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the token: %v", c.conf, err)
		}
	}

	// A systemd credential.
	t.Setenv("CREDENTIALS_DIRECTORY", dir)
	cfg, err = parsePushConfig("n.conf", strings.NewReader("target webhook url=https://h/ token-credential=tok\n"))
	if err != nil || cfg.targets[0].token != "secret" {
		t.Errorf("credential: %v %+v", err, cfg)
	}
	if err := os.WriteFile(filepath.Join(dir, "two"), []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parsePushConfig("n.conf", strings.NewReader("target webhook url=https://h/ token-credential=two\n")); err == nil || !strings.Contains(err.Error(), "a control byte or a second line") {
		t.Errorf("a two-line token: %v", err)
	}
}

func pushAgent(pid int, state, waiting, since string) client.Agent {
	return client.Agent{Harness: "claude", PID: pid, Started: 1000 + int64(pid), State: state, Waiting: waiting, Since: since, Cwd: "/src", Title: "t"}
}

func states(ts []transition) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.State+" "+t.Waiting)
	}
	return out
}

func TestPushStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "9harness", "notify.state")
	s, err := openPushStore(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pushConfig{on: pushKinds, idleAfter: time.Minute}
	targets := []string{"a", "b"}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	step := func(d time.Duration, agents ...client.Agent) []string {
		t.Helper()
		ts, err := s.observe("-", "box", agents, cfg, targets, now.Add(d))
		if err != nil {
			t.Fatal(err)
		}
		return states(ts)
	}
	// An agent waiting when first seen is told; a working one is not.
	if got := step(0, pushAgent(1, "waiting", "approve Bash", at(-time.Hour)), pushAgent(2, "working", "", at(0))); !slices.Equal(got, []string{"waiting approve Bash"}) {
		t.Errorf("first read: %q", got)
	}
	// The same wait again, better told: nothing.
	if got := step(time.Second, pushAgent(1, "waiting", "approve Bash (ls)", at(-time.Hour)), pushAgent(2, "working", "", at(0))); got != nil {
		t.Errorf("the same wait: %q", got)
	}
	// A turn of 30 s ends: not told (idle-after 1m); one of 2m: told.
	if got := step(30*time.Second, pushAgent(1, "waiting", "approve Bash", at(-time.Hour)), pushAgent(2, "idle", "", at(30*time.Second))); got != nil {
		t.Errorf("a short turn: %q", got)
	}
	step(40*time.Second, pushAgent(1, "working", "", at(40*time.Second)), pushAgent(2, "working", "", at(40*time.Second)))
	step(50*time.Second, pushAgent(1, "waiting", "approve Edit", at(50*time.Second)), pushAgent(2, "working", "", at(40*time.Second)))
	if got := step(3*time.Minute, pushAgent(1, "working", "", at(2*time.Minute)), pushAgent(2, "idle", "", at(3*time.Minute))); !slices.Equal(got, []string{"idle "}) {
		t.Errorf("a long turn: %q", got)
	}

	// A restart: the file is read again, the same table gives nothing,
	// the agent that went away is told as an exit, once.
	s2, err := openPushStore(path)
	if err != nil {
		t.Fatal(err)
	}
	s = s2
	if got := step(4*time.Minute, pushAgent(1, "working", "", at(2*time.Minute)), pushAgent(2, "idle", "", at(3*time.Minute))); got != nil {
		t.Errorf("after a restart: %q", got)
	}
	if got := step(5*time.Minute, pushAgent(1, "working", "", at(2*time.Minute))); !slices.Equal(got, []string{"exit "}) {
		t.Errorf("an exit: %q", got)
	}
	if got := step(6*time.Minute, pushAgent(1, "working", "", at(2*time.Minute))); got != nil {
		t.Errorf("after an exit: %q", got)
	}

	// Deliveries: oldest first, per target; settled ones are not given
	// again; all of it survives a reopen.
	tr, _, ok := s.next("a")
	if !ok || tr.State != "waiting" || tr.Waiting != "approve Bash" {
		t.Fatalf("next for a: %+v %v", tr, ok)
	}
	if err := s.settle(tr.ID, "a", true, now); err != nil {
		t.Fatal(err)
	}
	if tr2, _, _ := s.next("a"); tr2.ID == tr.ID {
		t.Errorf("a delivered transition is given again")
	}
	if tr2, _, _ := s.next("b"); tr2.ID != tr.ID {
		t.Errorf("b's first is %+v, want %+v", tr2, tr)
	}
	s, _ = openPushStore(path)
	if tr2, _, _ := s.next("a"); tr2.ID == tr.ID {
		t.Errorf("after a reopen, a delivered transition is given again")
	}
	// A target no longer configured: its pending ones are dropped.
	if err := s.forgetTargets([]string{"a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.next("b"); ok {
		t.Errorf("a removed target still has deliveries")
	}

	// The ids: the same fields, the same id; another since, another.
	if transitionID("-", "claude", 1, 2, "waiting", "x") != transitionID("-", "claude", 1, 2, "waiting", "x") ||
		transitionID("-", "claude", 1, 2, "waiting", "x") == transitionID("-", "claude", 1, 2, "waiting", "y") {
		t.Errorf("transition ids are not stable and distinct")
	}

	// Bounded: delivered records of agents gone are dropped at the next
	// read; anything older than a day is dropped; never more than
	// maxRecords.
	for id := range s.st.Records {
		for _, tg := range targets {
			s.settle(id, tg, true, now)
		}
	}
	if got := step(7 * time.Minute); !slices.Equal(got, []string{"exit "}) { // agent 1 is gone too
		t.Errorf("agent 1's exit: %q", got)
	}
	for _, r := range s.st.Records {
		if r.T.State != "exit" || r.T.PID != 1 {
			t.Errorf("a delivered record of an agent gone is kept: %+v", r.T)
		}
	}
	var many []client.Agent
	for i := range maxRecords + 100 {
		many = append(many, pushAgent(10+i, "waiting", "x", at(0)))
	}
	step(8*time.Minute, many...)
	if n := len(s.st.Records); n != maxRecords {
		t.Errorf("%d records, want the bound %d", n, maxRecords)
	}
	step(8*time.Minute+recordTTL+time.Second, many...)
	if n := len(s.st.Records); n != 0 {
		t.Errorf("%d records after a day", n)
	}
	b, _ := os.ReadFile(path)
	var st pushState
	if err := json.Unmarshal(b, &st); err != nil || st.Version != 1 {
		t.Errorf("state file: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode: %v %v", fi.Mode(), err)
	}
}

// A config that stops following a harness does not make its agents exit.
func TestPushStoreHarnessFilter(t *testing.T) {
	s, _ := openPushStore(filepath.Join(t.TempDir(), "s"))
	now := time.Now()
	codex := pushAgent(2, "working", "", "")
	codex.Harness = "codex"
	agents := []client.Agent{pushAgent(1, "working", "", ""), codex}
	if ts, _ := s.observe("-", "box", agents, &pushConfig{on: pushKinds}, []string{"a"}, now); len(ts) != 0 {
		t.Fatalf("first read: %+v", ts)
	}
	ts, _ := s.observe("-", "box", agents, &pushConfig{on: pushKinds, harnesses: []string{"claude"}}, []string{"a"}, now.Add(time.Second))
	if len(ts) != 0 {
		t.Errorf("a harness no longer followed: %q", states(ts))
	}
	ts, _ = s.observe("-", "box", agents[:1], &pushConfig{on: pushKinds, harnesses: []string{"claude"}}, []string{"a"}, now.Add(2*time.Second))
	if len(ts) != 0 {
		t.Errorf("an agent of a harness no longer followed exits: %q", states(ts))
	}
	ts, _ = s.observe("-", "box", nil, &pushConfig{on: pushKinds, harnesses: []string{"claude"}}, []string{"a"}, now.Add(3*time.Second))
	if !slices.Equal(states(ts), []string{"exit "}) {
		t.Errorf("the followed agent's exit: %q", states(ts))
	}
}

// An agent whose harness gives no since: a wait for something else is
// another wait; the same wait is not.
func TestPushStoreNoSince(t *testing.T) {
	s, _ := openPushStore(filepath.Join(t.TempDir(), "s"))
	cfg := &pushConfig{on: pushKinds, idleAfter: time.Minute}
	now := time.Now()
	n := 0
	for i, w := range []string{"approve Bash", "approve Bash", "approve Edit", "approve Edit"} {
		ts, _ := s.observe("-", "box", []client.Agent{pushAgent(1, "waiting", w, "")}, cfg, []string{"a"}, now.Add(time.Duration(i)*time.Second))
		n += len(ts)
	}
	if n != 2 {
		t.Errorf("%d transitions for two waits", n)
	}
}

func TestPushMessage(t *testing.T) {
	tr := transition{Shown: "box\x1b", Harness: "claude", PID: 7, State: "waiting", Waiting: "approve\nBash", Cwd: "/src/\x07x", Title: "<b>&"}
	if s := tr.summary(); s != "claude/7 waits: approve Bash" {
		t.Errorf("summary %q", s)
	}
	if b := tr.body(); b != "<b>&\nin /src/?x\non box?" {
		t.Errorf("body %q", b)
	}
	if b := escapeMarkup(tr.body()); b != "&lt;b&gt;&amp;\nin /src/?x\non box?" {
		t.Errorf("escaped %q", b)
	}
	w := tr.webhook()
	if w.Host != "box?" || w.Cwd != "/src/?x" || w.Waiting != "approve Bash" {
		t.Errorf("webhook %+v", w)
	}
	m := tr.ntfy(&pushTarget{topic: "t"})
	if m.Priority != 4 || m.Topic != "t" {
		t.Errorf("ntfy %+v", m)
	}
}
