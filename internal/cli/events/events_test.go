package events

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// TestFleetEventJSON: a fleet's --json line is the one-host line with
// "host" first.
func TestFleetEventJSON(t *testing.T) {
	for _, tc := range []struct {
		host, line, want string
	}{
		{"build1", "2026-12-01T21:40:03Z claude 345104 waiting approve Bash",
			`{"host":"build1","time":"2026-12-01T21:40:03Z","harness":"claude","pid":345104,"event":"waiting","what":"approve Bash"}`},
		{"-", "2026-12-01T21:40:03Z codex 7 idle",
			`{"host":"-","time":"2026-12-01T21:40:03Z","harness":"codex","pid":7,"event":"idle"}`},
		{"a@h:22", "2026-12-01T21:40:03Z - - lost 3",
			`{"host":"a@h:22","time":"2026-12-01T21:40:03Z","harness":"-","pid":0,"event":"lost","what":"3"}`},
	} {
		e, ok := fleet.ParseEvent(tc.line)
		if !ok {
			t.Fatalf("fleet.ParseEvent(%q) failed", tc.line)
		}
		b, err := json.Marshal(fleetEvent{Host: tc.host, Event: e})
		if err != nil || string(b) != tc.want {
			t.Errorf("%s %q:\n got %s (%v)\nwant %s", tc.host, tc.line, b, err, tc.want)
		}
	}
}

// TestFollowHostDownOnce: a host that cannot be reached is reported down
// once, and then retried quietly (with a backoff) until ctx ends, when
// fleet.FollowHost returns.
func TestFollowHostDownOnce(t *testing.T) {
	g := cli.NewGlobals("dev", nil)
	g.Sock = filepath.Join(t.TempDir(), "nobody.sock")
	ctx, cancel := context.WithCancel(context.Background())
	news := make(chan fleet.News, 16)
	ended := make(chan struct{})
	go func() {
		fleet.FollowHost(ctx, g.Dialer(), client.Host{Name: client.LocalHost}, time.Second, news)
		close(ended)
	}()
	select {
	case n := <-news:
		if n.Host != client.LocalHost || n.Err == nil || !strings.Contains(n.Err.Error(), g.Sock) {
			t.Fatalf("first news %+v, want - down naming the socket", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no news of an unreachable host within 5 s")
	}
	// minBackoff, then 2 s, then 4 s: three more attempts in 3.5 s, all
	// failed, none said again.
	select {
	case n := <-news:
		t.Fatalf("a second report of the same outage: %+v", n)
	case <-time.After(3500 * time.Millisecond):
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("FollowHost still running 5 s after its context ended")
	}
}
