package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/9harness/9harness/internal/proc"
)

// hermes is NousResearch's hermes-agent (root ~/.hermes, or $HERMES_HOME).
//
// Processes: the interactive CLI/TUI is "hermes", "hermes chat" or
// "hermes --tui". hermes is a Python console script, so its argv[0] is the
// venv's python and argv[1] is …/bin/hermes; it also runs as
// "python -m hermes_cli.main". Every other subcommand (gateway, dashboard,
// serve, acp, sessions, config, …) and the one-shot modes (-z, chat -Q,
// chat --oneshot) are helpers.
//
// Resolution: the per-process lease registry runtime/active_sessions.json
// (since June 2026): a lease is this process's when its pid matches and its
// process_start_time (psutil's float epoch seconds) is within 2 s of the
// process's start (boot time + starttime). Several leases may share a pid;
// the most recently updated wins, and Via says how many there were. Titles
// and models live only in state.db (sqlite), which is not read: they stay
// empty.
type hermes struct{}

func (hermes) Name() string { return "hermes" }

var (
	hermesFlags = flags{
		value: set("-z", "--oneshot", "-m", "--model", "--provider", "--reasoning", "-t",
			"--toolsets", "-r", "--resume", "-s", "--skills", "--usage-file", "--in",
			"-p", "--profile"),
		optional: set("-c", "--continue"),
	}
	pythonValueFlags = set("-W", "-X", "--check-hash-based-pycs")
)

// hermesArgs returns the hermes arguments of argv, if it is hermes.
func hermesArgs(argv []string) ([]string, bool) {
	b := base(argv[0])
	if b == "hermes" {
		return argv[1:], true
	}
	if !isPython(b) {
		return nil, false
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-m" && i+1 < len(argv):
			if m := argv[i+1]; m == "hermes_cli.main" || m == "hermes_cli" {
				return argv[i+2:], true
			}
			return nil, false
		case a == "-mhermes_cli.main":
			return argv[i+1:], true
		case a == "-c":
			return nil, false
		case pythonValueFlags[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if base(a) == "hermes" {
				return argv[i+1:], true
			}
			return nil, false
		}
	}
	return nil, false
}

// Classify implements Harness.
func (hermes) Classify(p, parent proc.Proc) Kind {
	if len(p.Argv) == 0 {
		return None
	}
	args, ok := hermesArgs(normArgv(p.Argv))
	if !ok {
		return None
	}
	sub := hermesFlags.positional(args)
	switch {
	case sub != "" && sub != "chat":
		return Helper
	case hasFlag(args, "-z", "--oneshot", "--version", "-V", "-h", "--help"):
		return Helper
	case sub == "chat" && hasFlag(args, "-Q", "--quiet"):
		return Helper
	}
	return Session
}

// hermesLease is one entry of runtime/active_sessions.json.
type hermesLease struct {
	SessionID        string          `json:"session_id"`
	Surface          string          `json:"surface"`
	PID              int             `json:"pid"`
	ProcessStartTime json.RawMessage `json:"process_start_time"`
	UpdatedAt        json.RawMessage `json:"updated_at"`
}

// Resolve implements Harness.
func (hermes) Resolve(env Env, p proc.Proc) Agent {
	a, _ := start("hermes", env, p)
	if env.Root == nil {
		return a
	}
	var reg struct {
		Entries []hermesLease `json:"entries"`
	}
	if !readJSON(env.Root, "runtime/active_sessions.json", 4<<20, &reg) {
		a.Via = "none (no lease registry)"
		return a
	}
	startT, ok := started(env, p)
	if !ok {
		a.Via = "none (no boot time to check the leases' process_start_time against)"
		return a
	}
	want := float64(startT.UnixNano()) / 1e9
	var best *hermesLease
	bestAt, n, other := math.Inf(-1), 0, 0
	for i := range reg.Entries {
		l := &reg.Entries[i]
		if l.PID != p.PID {
			continue
		}
		st, ok := number(l.ProcessStartTime)
		if !ok || math.Abs(st-want) > 2 {
			other++
			continue
		}
		if !safeArg(l.SessionID) {
			continue
		}
		n++
		at, _ := number(l.UpdatedAt)
		if best == nil || at >= bestAt {
			best, bestAt = l, at
		}
	}
	switch {
	case best != nil:
		a.Session, a.Via = best.SessionID, "registry"
		if n > 1 {
			a.Via = fmt.Sprintf("registry (%d leases on this pid; the most recently updated)", n)
		}
	case other > 0:
		a.Via = "none (the leases for this pid are another process's: process_start_time differs)"
	default:
		a.Via = "none (no lease for this pid)"
	}
	return a
}

// Resume implements Harness: hermes --resume <sid>. hermes cds into the
// session's recorded cwd itself.
func (hermes) Resume(a Agent, env Env) ([]string, error) {
	if !safeArg(a.Session) {
		return nil, unresolved("hermes", a)
	}
	return []string{"hermes", "--resume", a.Session}, nil
}

var _ = register(hermes{}, &hermesSpec)

var hermesSpec = Spec{
	Name:    "hermes",
	Order:   50,
	Mirrors: []Mirror{{At: "", Rel: ""}},
	// sessions and messages (state.db), the live session index.
	Grantee: []string{"sessions", "state.db", "state.db-wal", "state.db-shm", "runtime/active_sessions.json", "skills"},
	// checkpoints/<sha256(dir)[:16]>/: a shadow git repository of each
	// working directory (zlib objects of every file), also under each
	// profile.
	CopyStores: []string{"checkpoints", "profiles/*/checkpoints"},
	Credentials: []Credential{
		{"config.yml", "hermes"},
		{"config.yaml", "hermes"},
		{"creds.json", "hermes whatsapp/session/creds.json (Baileys)"},
		{"app-state-sync-key-*", "hermes whatsapp/session (Baileys): app state sync keys"},
		{"pre-key-*", "hermes whatsapp/session (Baileys): Signal pre-keys"},
		{"sender-key-*", "hermes whatsapp/session (Baileys): Signal sender keys"},
		{".env", "hermes ~/.hermes/.env: API keys"},
	},
	Env: []string{"HERMES_HOME"},
	Doc: Doc{
		Title:   "hermes",
		Root:    "~/.hermes",
		Process: "`hermes`",
		Via:     "`registry` (its leases, vetted by start time)",
		Resume:  "`hermes --resume ID`",
		RealCLI: "fixtures only",
	},
}
