//go:build !realcli_issue18

package realcli

// Not yet built (issue 18): a Codex thread's title from state_5.sqlite
// when there is no /rename, and the route from a default Codex TUI to the
// thread its app-server daemon holds. Until then the tier asserts what is
// served now: no title without a /rename (absent, never a guess), and it
// runs the default-mode Codex only with -tags realcli_issue18.
const (
	codexThreadTitles = false
	codexDaemonRoute  = false
)
