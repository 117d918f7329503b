package realcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// TestCodexLimits: the mock answers a real Codex turn with the rate-limit
// headers Codex's service sends for the account's 5-hour and weekly
// windows; Codex records them in its rollout's token_count, and the
// daemon serves both windows in limits and ps shows the fuller one.
func TestCodexLimits(t *testing.T) {
	t.Parallel()
	w := codexWorld(t)
	now := time.Now().UTC().Truncate(time.Second)
	primary := LimitWindow{UsedPercent: 42.5, WindowMinutes: 300, ResetsAt: now.Add(2 * time.Hour)}
	secondary := LimitWindow{UsedPercent: 87, WindowMinutes: 10080, ResetsAt: now.Add(72 * time.Hour)}
	w.mock.SetCodexLimits(primary, secondary)
	d := w.startDaemon([]*cli{codex})
	cwd := w.cwd("limits")
	a := codex.start(w, "cxlim", cwd, codexNoDaemon...)
	a.prompt("say hello limits")
	f := a.facts()
	logCodexRequests(t, w)

	// What Codex wrote: its newest token_count's rate_limits.
	var wrote string
	w.waitFor(30*time.Second, &a.pane, "a token_count with rate_limits in the rollout", func() bool {
		wrote = newestRateLimits(f.transcript)
		return wrote != ""
	})
	t.Logf("Codex wrote rate_limits %s", wrote)
	var rl struct {
		Primary, Secondary *struct {
			UsedPercent   float64 `json:"used_percent"`
			WindowMinutes int64   `json:"window_minutes"`
			ResetsAt      int64   `json:"resets_at"`
		}
	}
	if err := json.Unmarshal([]byte(wrote), &rl); err != nil || rl.Primary == nil || rl.Secondary == nil {
		t.Fatalf("Codex's rate_limits %s (%v) lack a window the mock sent: a custom provider's headers ignored?", wrote, err)
	}
	for _, c := range []struct {
		name string
		got  *struct {
			UsedPercent   float64 `json:"used_percent"`
			WindowMinutes int64   `json:"window_minutes"`
			ResetsAt      int64   `json:"resets_at"`
		}
		want LimitWindow
	}{{"primary", rl.Primary, primary}, {"secondary", rl.Secondary, secondary}} {
		if c.got.UsedPercent != c.want.UsedPercent || c.got.WindowMinutes != c.want.WindowMinutes || c.got.ResetsAt != c.want.ResetsAt.Unix() {
			t.Errorf("Codex wrote %s %+v, the mock sent %+v", c.name, *c.got, c.want)
		}
	}

	want := "primary 42.5 300 " + primary.ResetsAt.Format(time.RFC3339) + "\n" +
		"secondary 87 10080 " + secondary.ResetsAt.Format(time.RFC3339)
	path := client.AgentDir("codex", a.pid) + "/limits"
	var got string
	w.waitFor(20*time.Second, &a.pane, path+" with both windows", func() bool {
		b, err := d.c.ReadFile(path)
		got = strings.TrimSpace(string(b))
		return err == nil && got == want
	})
	t.Logf("%s:\n%s", path, got)

	out, err := exec.Command(bin("9harness"), "-s", d.sock, "ps", "--no-trunc").CombinedOutput()
	t.Logf("9harness ps:\n%s", out)
	if err != nil {
		t.Fatalf("9harness ps: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	col := strings.Index(lines[0], "LIMITS")
	if col < 0 {
		t.Fatalf("9harness ps has no LIMITS column")
	}
	found := false
	for _, l := range lines[1:] {
		fs := strings.Fields(l)
		if len(fs) > 1 && fs[0] == "codex" && fs[1] == itoa(a.pid) {
			found = true
			if !strings.Contains(l, "7d 87%") {
				t.Errorf("9harness ps shows codex/%d without its fuller window 7d 87%%: %q", a.pid, l)
			}
		}
	}
	if !found {
		t.Errorf("9harness ps does not list codex/%d", a.pid)
	}

	out, err = exec.Command(bin("9harness"), "-s", d.sock, "ps", "--json").Output()
	var rows []struct {
		Harness string        `json:"harness"`
		PID     int           `json:"pid"`
		Limits  client.Limits `json:"limits"`
	}
	if err != nil || json.Unmarshal(out, &rows) != nil {
		t.Fatalf("9harness ps --json: %v\n%s", err, out)
	}
	wantJSON := client.Limits{
		"primary":   {UsedPercent: 42.5, WindowMinutes: 300, ResetsAt: primary.ResetsAt.Format(time.RFC3339)},
		"secondary": {UsedPercent: 87, WindowMinutes: 10080, ResetsAt: secondary.ResetsAt.Format(time.RFC3339)},
	}
	found = false
	for _, r := range rows {
		if r.Harness == "codex" && r.PID == a.pid {
			found = true
			if !maps.Equal(r.Limits, wantJSON) {
				t.Errorf("9harness ps --json limits of codex/%d = %+v, want %+v", a.pid, r.Limits, wantJSON)
			}
		}
	}
	if !found {
		t.Errorf("9harness ps --json does not list codex/%d", a.pid)
	}
}

// newestRateLimits is the rate_limits object of the newest token_count
// event of the rollout at path that has one, "" when none has.
func newestRateLimits(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				Type       string          `json:"type"`
				RateLimits json.RawMessage `json:"rate_limits"`
			} `json:"payload"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Type == "event_msg" && l.Payload.Type == "token_count" &&
			len(l.Payload.RateLimits) > 0 && string(l.Payload.RateLimits) != "null" {
			last = string(l.Payload.RateLimits)
		}
	}
	return last
}
