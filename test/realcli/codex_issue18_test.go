//go:build realcli_issue18

package realcli

import (
	"testing"
	"time"
)

// What issue 18 (real agents) delivers and this tier already checks, run
// with -tags realcli_issue18 (make realcli-issue18) until it is built, then
// folded into the default run: Codex's titles from state_5.sqlite, and a
// default Codex, whose shared app-server daemon (not the TUI) holds the
// rollout open.
const (
	codexThreadTitles = true
	codexDaemonRoute  = true
)

// TestCodexDefault: Codex as installed, with its shared app-server daemon,
// which (not the TUI) holds the rollout open: the TUI's facts all the
// same, the daemon and its pid-update loop never listed, and a move.
func TestCodexDefault(t *testing.T) {
	t.Parallel()
	codexAlone(t)
	w := newWorld(t)
	d := w.startDaemon([]*cli{codex}, "--allow-move")
	cwd := w.cwd("codexd")
	a := codex.start(w, "cxd1", cwd)
	a.prompt("say hello bravo")
	f := a.facts()
	logCodexRequests(t, w)
	w.waitFor(20*time.Second, nil, "Codex's app-server daemon", func() bool { return len(codexDaemons(w)) > 0 })
	t.Run("facts", func(t *testing.T) {
		d.checkFacts(t, "codex", a.pid, cwd, f)
		d.checkListed(t, map[int]string{a.pid: "codex"})
	})
	moved(t, w, d, a, "cxdmoved")
}
