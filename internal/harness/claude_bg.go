package harness

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/proc"
)

// Claude's background sessions (claude --bg, /bg; claude agents, attach,
// logs, stop, rm, respawn), as Claude Code 2.1.332 runs them:
//
//	claude.exe daemon run --origin transient …          the supervisor (a helper: "daemon")
//	└ claude bg-pty-host --bg-pty-host SOCK 200 50 -- …  a pty host per worker (a helper)
//	  └ claude bg-spare --bg-spare CLAIM.sock            the worker: the session, once claimed
//
// The supervisor keeps a spare worker ready; a spare becomes a session when
// a job claims it, and only then writes its registry record
// sessions/<pid>.json, with "kind":"bg" and the job's "jobId" (the short id
// claude attach takes). A worker the supervisor respawns after a crash is
// "claude.exe --resume <transcript>" (or the versioned binary of a native
// install) under a new pty host, with a new record. So a worker is the
// process whose exit ends the session, and it is listed only while its
// registry record vets it (confirmed): an unclaimed spare is a helper.
//
// The job's own record is jobs/<jobId>/state.json: "state" is the job's
// life (working, running, blocked, idle, crashed; stopped, done, completed,
// failed at the end), "tempo" its turn (active, blocked, idle), with
// "updatedAt". It also names the provider's environment, so it is read
// only for those fields and never served.

// claudeJob is the part of jobs/<id>/state.json 9harness reads.
type claudeJob struct {
	State     string `json:"state"`
	Detail    string `json:"detail"`
	Tempo     string `json:"tempo"`
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Intent    string `json:"intent"`
	UpdatedAt string `json:"updatedAt"`
	CreatedAt string `json:"createdAt"`
}

// claudeJobEnded are the job states that claim no process.
var claudeJobEnded = set("stopped", "done", "completed", "failed")

// claudeJobID reports whether s can be a job's short id: one path
// component and one argv word (Claude's are 8 hex digits).
func claudeJobID(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' || s[0] == '.' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// claudeBgWorker reports whether a Claude process is shaped like a
// background session's worker: the versioned binary run by Claude itself,
// or a --bg-spare (the pty host's own argv names its worker's after "--").
func claudeBgWorker(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	if strings.Contains(argv[0], "/claude/versions/") && claudeVersion.MatchString(base(argv[0])) {
		return true
	}
	return hasFlag(argv[1:], "--bg-spare")
}

// claudeBgKind classifies the --bg-* processes and the versioned binary:
// the pty hosts, the supervisor and the other --bg-* processes are
// helpers; a worker is a session (listed only once Confirm finds its
// registry record). ok is false for a process that is none of these.
func claudeBgKind(argv []string) (k Kind, ok bool) {
	args := argv[1:]
	if hasFlag(args, "--bg-pty-host") {
		return Helper, true
	}
	if claudeBgWorker(argv) {
		if claudeHelperWords[claudeFlags.positional(args)] {
			return Helper, true
		}
		return Session, true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "--bg-") {
			return Helper, true
		}
	}
	return None, false
}

// Confirm implements confirmer: a background worker is an agent only
// while a registry record vets it (pid and start time), i.e. once a job
// claimed it; every other Claude session is confirmed by its shape.
func (claude) Confirm(env Env, p proc.Proc) bool {
	if !claudeBgWorker(normArgv(p.Argv)) {
		return true
	}
	if env.Root == nil {
		return false
	}
	if env.Memo == nil {
		env.Memo = NewMemo()
	}
	reg, _ := claudeRegistry(env, p)
	return reg != nil
}

// claudeBg fills what a background session's record adds: the attach
// command, and the job's turn state when its state.json is fresher than
// the registry's status.
func claudeBg(env Env, a *Agent, reg *claudeReg) {
	if reg == nil || !claudeJobID(reg.JobID) {
		return
	}
	if reg.Kind != "bg" && reg.Kind != "background" && reg.Kind != "daemon" {
		return
	}
	a.Attach = "claude attach " + reg.JobID
	var job claudeJob
	if env.Root == nil || !readJSON(env.Root, "jobs/"+reg.JobID+"/state.json", smallFile, &job) {
		return
	}
	at, ok := parseTime(job.UpdatedAt)
	if !ok || !at.After(a.Since) && a.State != "" {
		return
	}
	t := turn{via: "job (jobs/" + reg.JobID + "/state.json tempo " + job.Tempo + ", fresher than the registry)", since: at}
	switch job.Tempo {
	case "active":
		t.state = StateWorking
	case "blocked":
		t.state, t.waiting = StateWaiting, cleanTitle(job.Detail)
	case "idle":
		t.state = StateIdle
	default:
		return
	}
	t.set(a)
}

// Background is the refusal of a move of a background session: the
// supervisor owns it (a kill would be respawned, or lose the job), and
// claude attach already reaches it from any terminal.
const Background = "a background session"

// claudeBgRefusal is Resume's refusal for a's session, or nil when a is
// not a background session.
func claudeBgRefusal(a Agent) error {
	if a.Attach == "" {
		return nil
	}
	return errs.E("harness.Resume", errs.Permission, "", fmt.Errorf("%s: %s", Background, a.Attach))
}

// ---- stale records ----

// Stale is a record a harness keeps for an agent that no longer runs:
// what it claims, the pid it names, since when (the record's own time),
// and why it is stale. ID names it under /stale/<harness>/.
type Stale struct {
	ID    string
	Claim string
	PID   int
	Since time.Time
	Why   string
	// Session is the session the record names, "" when none.
	Session string
}

// staleMax bounds the records one listing reads.
const staleMax = 4096

// claudeStale lists Claude's stale records: registry records
// sessions/<pid>.json whose pid is not running, or runs another program
// (its start time is not the record's procStart); and background jobs
// jobs/<id>/state.json whose state claims a process (not stopped, done,
// completed or failed) while no live registry record names the job.
func claudeStale(env Env) []Stale {
	if env.Root == nil || env.Procs == nil {
		return nil
	}
	var out []Stale
	liveJobs := map[string]bool{}
	ents, _ := env.Root.ReadDir("sessions")
	for i, e := range ents {
		if i >= staleMax {
			break
		}
		if e.Dir || !claudeRecord.MatchString(e.Name) {
			continue
		}
		var reg claudeReg
		if !readJSON(env.Root, "sessions/"+e.Name, smallFile, &reg) || reg.PID <= 0 {
			continue
		}
		if fmt.Sprint(reg.PID)+".json" != e.Name {
			continue
		}
		if reg.PIDDomain != "" && env.PIDDomain != "" && !SamePIDDomain(reg.PIDDomain, env.PIDDomain) {
			continue // another pid namespace's pid: not for this table to judge
		}
		why := claudeDead(env, &reg)
		if why == "" {
			if claudeJobID(reg.JobID) {
				liveJobs[reg.JobID] = true
			}
			continue
		}
		claim := "registry: session " + reg.SessionID
		if reg.Status != "" {
			claim += " " + reg.Status
		}
		if reg.Kind != "" {
			claim += " (" + reg.Kind + ")"
		}
		s := Stale{ID: "registry-" + fmt.Sprint(reg.PID), Claim: claim, PID: reg.PID, Why: why}
		if isUUID(reg.SessionID) {
			s.Session = reg.SessionID
		}
		for _, raw := range []json.RawMessage{reg.UpdatedAt, reg.StatusUpdatedAt, reg.StartedAt} {
			if ms, ok := number(raw); ok && ms > 0 {
				if t := time.UnixMilli(int64(ms)); t.After(s.Since) {
					s.Since = t
				}
			}
		}
		out = append(out, s)
	}
	jobs, _ := env.Root.ReadDir("jobs")
	for i, e := range jobs {
		if i >= staleMax {
			break
		}
		if !e.Dir || !claudeJobID(e.Name) || liveJobs[e.Name] {
			continue
		}
		var job claudeJob
		if !readJSON(env.Root, "jobs/"+e.Name+"/state.json", smallFile, &job) || job.State == "" || claudeJobEnded[job.State] {
			continue
		}
		s := Stale{ID: "job-" + e.Name, Claim: "job " + e.Name + ": " + job.State, Why: "no live process has the job's registry record"}
		if job.Detail != "" {
			s.Claim += " (" + cleanTitle(job.Detail) + ")"
		}
		if isUUID(job.SessionID) {
			s.Session = job.SessionID
		}
		s.Since, _ = parseTime(job.UpdatedAt)
		out = append(out, s)
	}
	return out
}

// claudeDead says why a registry record's pid is not the agent it names,
// or "" when that agent runs.
func claudeDead(env Env, reg *claudeReg) string {
	p, err := env.Procs.Stat(reg.PID)
	if err != nil {
		return fmt.Sprintf("pid %d is not running", reg.PID)
	}
	if ps := strings.Trim(string(reg.ProcStart), `"`); ps != "" && ps != "null" && ps != fmt.Sprint(p.Start) {
		return fmt.Sprintf("pid %d is another process (started at tick %d; the record's procStart is %s)", reg.PID, p.Start, ps)
	}
	// A process that has exited and is not yet reaped keeps its pid and
	// start time, and has no argv.
	if argv, err := env.Procs.Argv(reg.PID); err != nil || len(argv) == 0 {
		return fmt.Sprintf("pid %d is not running (it exited; its parent has not reaped it)", reg.PID)
	}
	return ""
}
