package move

import (
	"context"
	"path/filepath"

	"github.com/9harness/9harness/internal/proc"
)

// TmuxSessions names the tmux session an agent is in, for the tree's tmux
// file (tree.SessionHost). It asks with the same care as a move, because a
// tmux client obeys its server (a server can make its client run a
// command), and the agent chose the socket:
//
//   - tmux is the one on the daemon's host path, never the agent's PATH
//     (rule 7);
//   - the agent is not sandboxed (proc.Table.Sandboxed: no namespace,
//     seccomp filter, no_new_privs or LSM label the reference lacks): a
//     sandboxed agent's socket names a file in its sandbox, or a server
//     it runs, and a server there is not asked (rule 9);
//   - the socket passes TrustedTmux: a socket of uid's, in a directory
//     no one else may write, served by a process of uid's in no sandbox;
//     the client reaches that server through the socket's pinned inode,
//     confined so that it can open no file the server names.
//
// Any refusal answers "": the tmux file is then empty, as for an agent in
// no session it can name.
type TmuxSessions struct {
	Procs    *proc.Table
	UID      uint32
	HostPath string
	// Sandbox judges the tmux server (judgeTmux); nil trusts none.
	Sandbox Judge
}

// TmuxSession implements tree.SessionHost.
func (s TmuxSessions) TmuxSession(ctx context.Context, agent proc.Proc, socket, pane, tmpdir string) string {
	if socket == "" || pane == "" || !filepath.IsAbs(socket) {
		return ""
	}
	if sb, err := s.Procs.Sandboxed(agent); err != nil || sb != "" {
		return ""
	}
	tm, err := lookPath("tmux", s.HostPath)
	if err != nil {
		return ""
	}
	name, err := tmuxSessionOf(ctx, s.Sandbox, s.UID, tm, s.HostPath, socket, pane)
	if err != nil {
		return ""
	}
	return TmuxDisplay(socket, tmpdir, s.UID, name)
}
