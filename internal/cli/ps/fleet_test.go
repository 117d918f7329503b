package ps

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

func TestSortFleet(t *testing.T) {
	rows := []fleet.Row{
		{Host: "b", Agent: client.Agent{Harness: "codex", PID: 1}},
		{Host: "-", Agent: client.Agent{Harness: "claude", PID: 9}},
		{Host: "a", Agent: client.Agent{Harness: "codex", PID: 3}},
		{Host: "a", Agent: client.Agent{Harness: "claude", PID: 5}},
		{Host: "a", Agent: client.Agent{Harness: "claude", PID: 2}},
	}
	sortFleet(rows, "", false)
	var got []string
	for _, r := range rows {
		got = append(got, fleet.AgentName(r))
	}
	want := []string{"claude/9", "a:claude/2", "a:claude/5", "a:codex/3", "b:codex/1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sortFleet = %q, want %q", got, want)
	}
}

func TestFleetTable(t *testing.T) {
	rows := []fleet.Row{
		{Host: "-", Agent: client.Agent{Harness: "claude", PID: 9, Cwd: "/home/u/src"}},
		{Host: "alice@build1", Agent: client.Agent{Harness: "codex", PID: 3, Cwd: "/home/u/src"}},
	}
	lines := fleetTable(rows, time.Now(), "/home/u", psLayout{})
	if len(lines) != 3 {
		t.Fatalf("fleetTable: %q", lines)
	}
	for i, want := range [][]string{{"HOST", "HARNESS", "PID"}, {"-", "claude", "9"}, {"alice@build1", "codex", "3"}} {
		if f := strings.Fields(lines[i]); len(f) < 3 || !reflect.DeepEqual(f[:3], want) {
			t.Errorf("line %d = %q, want it to start %q", i, lines[i], want)
		}
	}
	// This machine's $HOME is ~; a remote host's is not this one's.
	if !strings.Contains(lines[1], " ~/src ") || !strings.Contains(lines[2], " /home/u/src ") {
		t.Errorf("CWD: %q", lines)
	}
	// The columns line up: PID ends at the same cell on every line.
	end := strings.Index(lines[0], "PID") + 3
	for _, l := range lines[1:] {
		if l[end-1] == ' ' || l[end] != ' ' {
			t.Errorf("PID not right-aligned at cell %d: %q", end, lines)
		}
	}
	if got := fleetTable(rows, time.Now(), "", psLayout{noHeader: true}); len(got) != 2 || !strings.HasPrefix(got[0], "-  ") {
		t.Errorf("--no-header: %q", got)
	}
}
