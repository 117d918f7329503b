package wait

import (
	"bytes"
	"errors"
	"testing"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
)

// TestFleetWaiter: a host's table counts once read; a host that goes down
// is looked at, holds no agent, and makes a timeout partial until it is
// back.
func TestFleetWaiter(t *testing.T) {
	hosts := []client.Host{{Name: "-"}, {Name: "b1"}}
	fw := fleetWaiter{"-": {}, "b1": {}}
	states := []string{"waiting"}
	if m, all := fw.matches(hosts, states); len(m) != 0 || all {
		t.Fatalf("at the start: %v, all seen %v", m, all)
	}
	var errb bytes.Buffer
	fw.take(cli.HostTable{Host: "-", Agents: []client.Agent{agent("claude", 1, 1, "working", "")}}, &errb)
	fw.take(cli.HostTable{Host: "b1", Err: errors.New("no daemon")}, &errb)
	if errb.String() != "9harness wait: b1: no daemon\n" {
		t.Errorf("down: %q", errb.String())
	}
	if m, all := fw.matches(hosts, states); len(m) != 0 || !all {
		t.Errorf("one working, one down: %v, all seen %v", m, all)
	}
	errb.Reset()
	if code := fw.timedOut("waiting", &errb); code != cli.ExitPartial {
		t.Errorf("timed out with a host down: exit %d, %q", code, errb.String())
	}
	fw.take(cli.HostTable{Host: "b1", Back: true}, &errb)
	if code := fw.timedOut("waiting", &errb); code != cli.ExitTimeout {
		t.Errorf("timed out with every host up: exit %d", code)
	}
	fw.take(cli.HostTable{Host: "b1", Agents: []client.Agent{agent("codex", 7, 1, "waiting", "y"), agent("codex", 3, 1, "waiting", "")}}, &errb)
	m, _ := fw.matches(hosts, states)
	var out bytes.Buffer
	if code := printFleetMatches(m, false, &out, &errb); code != cli.ExitOK || out.String() != "b1 codex/3 waiting\nb1 codex/7 waiting y\n" {
		t.Errorf("matches: exit %d, %q", code, out.String())
	}
}
