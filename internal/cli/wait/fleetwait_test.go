package wait

import (
	"bytes"
	"errors"
	"testing"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// TestFleetWaiter: a host's table counts once read; a host that goes down
// is looked at, holds no agent, makes a timeout partial, and a table read
// before it went down is not taken.
func TestFleetWaiter(t *testing.T) {
	hosts := []client.Host{{Name: "-"}, {Name: "b1"}}
	fw := newFleetWaiter(hosts, nil)
	states := []string{"waiting"}
	if m, all := fw.matches(hosts, states); len(m) != 0 || all {
		t.Fatalf("at the start: %v, all seen %v", m, all)
	}
	fw.state["b1"].reading = true
	fw.got(hostRead{host: "b1", agents: []client.Agent{agent("codex", 7, 1, "working", "")}})
	var errb bytes.Buffer
	fw.news(fleet.News{Host: "-", Err: errors.New("no daemon")}, &errb)
	if errb.String() != "9harness wait: -: no daemon\n" {
		t.Errorf("down: %q", errb.String())
	}
	fw.state["-"].reading = true
	fw.got(hostRead{host: "-", agents: []client.Agent{agent("claude", 1, 1, "waiting", "")}})
	if m, all := fw.matches(hosts, states); len(m) != 0 || !all {
		t.Errorf("a table read as the host went down counted: %v, all seen %v", m, all)
	}
	errb.Reset()
	if code := fw.timedOut("waiting", &errb); code != cli.ExitPartial {
		t.Errorf("timed out with a host down: exit %d, %q", code, errb.String())
	}
	fw.state["b1"].reading = true
	fw.got(hostRead{host: "b1", agents: []client.Agent{agent("codex", 7, 1, "waiting", "y"), agent("codex", 3, 1, "waiting", "")}})
	m, _ := fw.matches(hosts, states)
	var out bytes.Buffer
	if code := printFleetMatches(m, false, &out, &errb); code != cli.ExitOK || out.String() != "b1 codex/3 waiting\nb1 codex/7 waiting y\n" {
		t.Errorf("matches: exit %d, %q", code, out.String())
	}
}
