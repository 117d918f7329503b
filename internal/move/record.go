package move

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/9harness/9harness/internal/audit"
	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
)

// record writes the journal entries of one move: one for a refusal, or one
// when it starts and one when it ends.
type record struct {
	m      *Mover
	r      Request
	target string
	agent  harness.Agent
	resume []string
	t      Target
	// dropped counts environment entries that were not NAME=value;
	// binRoute says which rule picked the resume binary.
	dropped  int
	binRoute string
	// kept and dropFlags name the agent's own flags the resume keeps and
	// drops, by name only: their values can hold keys.
	kept, dropFlags []string
}

func (rec *record) fields(decision, reason string) map[string]string {
	r := rec.r
	f := map[string]string{
		"PEER_UID":    strconv.FormatUint(uint64(r.Peer.UID), 10),
		"PEER_GID":    strconv.FormatUint(uint64(r.Peer.GID), 10),
		"PEER_PID":    strconv.Itoa(int(r.Peer.PID)),
		"PEER_COMM":   r.PeerCmd,
		"ACTION":      "move",
		"DECISION":    decision,
		"HARNESS":     r.Harness.Name(),
		"AGENT_PID":   strconv.Itoa(r.Proc.PID),
		"AGENT_START": strconv.FormatUint(r.Proc.Start, 10),
		"HOST":        r.Host.Name(),
		"TARGET":      rec.target,
	}
	if reason != "" {
		f["REASON"] = reason
	}
	if rec.agent.Session != "" {
		f["SESSION"] = rec.agent.Session
	}
	if rec.agent.Cwd != "" {
		f["CWD"] = rec.agent.Cwd
	}
	if rec.t.Label != "" {
		f["TMUX_SERVER"] = rec.t.Label
	}
	if rec.dropped > 0 {
		f["ENV_DROPPED"] = strconv.Itoa(rec.dropped)
	}
	if rec.binRoute != "" {
		f["RESUME_BINARY"] = rec.binRoute
	}
	if len(rec.kept) > 0 {
		f["FLAGS_KEPT"] = strings.Join(rec.kept, ",")
	}
	if len(rec.dropFlags) > 0 {
		f["FLAGS_DROPPED"] = strings.Join(rec.dropFlags, ",")
	}
	return f
}

func (rec *record) send(id string, pri audit.Event, f map[string]string) {
	if rec.m.Audit == nil {
		return
	}
	pri.ID, pri.Fields = id, f
	rec.m.Audit.Send(pri)
}

// refuse records a refusal (nothing was touched) and returns the error.
func (rec *record) refuse(kind errs.Kind, reason string) error {
	f := rec.fields("deny", reason)
	rec.send(audit.IDMoveRefused, audit.Event{Priority: audit.PriNotice,
		Message: fmt.Sprintf("refused to move %s agent %d into %s session %q: %s", rec.r.Harness.Name(), rec.r.Proc.PID, rec.r.Host.Name(), rec.target, reason)}, f)
	return errs.E("move", kind, rec.target, errors.New(reason))
}

func (rec *record) started() {
	rec.send(audit.IDMoveStarted, audit.Event{Priority: audit.PriNotice,
		Message: fmt.Sprintf("moving %s agent %d (session %s) into %s session %q", rec.r.Harness.Name(), rec.r.Proc.PID, rec.agent.Session, rec.r.Host.Name(), rec.target)},
		rec.fields("allow", ""))
}

// fail records a move that started and did not complete, with the exact
// command that resumes the session by hand.
func (rec *record) fail(kind errs.Kind, reason string) error {
	f := rec.fields("allow", reason)
	f["OUTCOME"] = "failed"
	f["RESUME"] = rec.manual()
	rec.send(audit.IDMoveFailed, audit.Event{Priority: audit.PriErr,
		Message: fmt.Sprintf("moving %s agent %d into %s session %q failed: %s; resume by hand: %s", rec.r.Harness.Name(), rec.r.Proc.PID, rec.r.Host.Name(), rec.target, reason, f["RESUME"])}, f)
	return errs.E("move", kind, rec.target, fmt.Errorf("%s; resume by hand: %s", reason, f["RESUME"]))
}

func (rec *record) done(newPID int, via string) {
	f := rec.fields("allow", "")
	f["OUTCOME"] = "moved"
	f["NEW_PID"] = strconv.Itoa(newPID)
	f["NEW_VIA"] = via
	rec.send(audit.IDMoveDone, audit.Event{Priority: audit.PriInfo,
		Message: fmt.Sprintf("moved %s agent %d into %s session %q as pid %d (verified by %s); attach with: %s", rec.r.Harness.Name(), rec.r.Proc.PID, rec.r.Host.Name(), rec.target, newPID, via, rec.r.Host.Attach(rec.t))}, f)
}

// manual is the shell command that resumes the session by hand: the
// agent's resume file's line (harness.ResumeLine), except that the value
// of a flag that can hold a key (a settings or MCP file's contents, a -c
// override) is not written out: the journal names such flags only.
func (rec *record) manual() string {
	words := make([]string, len(rec.resume))
	secret := false
	for i, a := range rec.resume {
		switch {
		case secret:
			words[i] = "<as before>"
		case secretFlag(a) && strings.Contains(a, "="):
			k, _, _ := strings.Cut(a, "=")
			words[i] = k + "=<as before>"
		default:
			words[i] = a
		}
		secret = secretFlag(a) && !strings.Contains(a, "=")
	}
	return harness.ResumeLine(rec.agent.Cwd, words)
}

// secretFlag is a flag whose value may hold a credential.
func secretFlag(a string) bool {
	k, _, _ := strings.Cut(a, "=")
	switch k {
	case "-c", "--config", "--settings", "--mcp-config":
		return true
	}
	return false
}
