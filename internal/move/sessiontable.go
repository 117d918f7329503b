package move

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/9harness/9harness/internal/proc"
)

// TmuxServer implements tree.SessionTable: it asks the server at socket
// once for the session of every pane (list-panes -a), with the care
// TmuxSession takes (the host's tmux, a judged server, a confined
// client), and returns what
// TmuxSession would answer for each agent on that server; the per-agent
// checks (alive, not sandboxed: proc.Table.Sandboxed) stay per agent, as they
// cost no process. A server that cannot be asked answers "" for all.
func (s TmuxSessions) TmuxServer(ctx context.Context, socket string) func(agent proc.Proc, pane, tmpdir string) string {
	none := func(proc.Proc, string, string) string { return "" }
	if socket == "" || !filepath.IsAbs(socket) {
		return none
	}
	ref, err := s.Procs.ReferenceConfinement()
	if err != nil {
		return none
	}
	tm, err := lookPath("tmux", s.HostPath)
	if err != nil {
		return none
	}
	// The server is asked only for an agent that passes the per-agent
	// checks, and at most once: an agent in a sandbox
	// can name a socket of a server it runs itself, and a tmux client does
	// what its server tells it, so its socket must never be dialled on its
	// word alone (rule 9). The caller's deadline bounds that one call.
	bound := tmuxLookupBound
	if d, ok := ctx.Deadline(); ok {
		bound = time.Until(d)
	}
	var (
		once  sync.Once
		panes map[string]string
	)
	return func(agent proc.Proc, pane, tmpdir string) string {
		if pane == "" {
			return ""
		}
		if sb, err := s.Procs.SandboxedAgainst(ref, agent); err != nil || sb != "" {
			return ""
		}
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			panes, _ = tmuxPaneSessions(ctx, s.Sandbox, s.UID, tm, s.HostPath, socket)
		})
		name, ok := panes[pane]
		if !ok {
			return ""
		}
		return TmuxDisplay(socket, tmpdir, s.UID, name)
	}
}

// tmuxLookupBound bounds the one tmux call of a table read when the caller
// gave no deadline: a server that does not answer must not hold the read.
const tmuxLookupBound = 2 * time.Second

// tmuxPaneSessions maps every pane id (%N) of the server at socket to the
// name of its session, with one tmux call.
func tmuxPaneSessions(ctx context.Context, judge Judge, uid uint32, bin, hostPath, socket string) (map[string]string, error) {
	out, err := askTmux(ctx, judge, uid, bin, daemonEnv(hostPath), socket, "list-panes", "-a", "-F", "#{pane_id} #{session_name}")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, ln := range strings.Split(string(out), "\n") {
		if id, name, ok := strings.Cut(ln, " "); ok && strings.HasPrefix(id, "%") {
			m[id] = name
		}
	}
	return m, nil
}
