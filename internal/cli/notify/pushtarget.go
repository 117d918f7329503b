package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// deliverTimeout bounds one attempt of one delivery.
const deliverTimeout = 30 * time.Second

// summary is a transition's one line: what happened to which agent.
func (t transition) summary() string {
	who := fleet.Printable(t.Harness) + "/" + fmt.Sprint(t.PID)
	switch t.State {
	case "waiting":
		if t.Waiting != "" {
			return who + " waits: " + fleet.Printable(t.Waiting)
		}
		return who + " waits"
	case "idle":
		if t.Worked > 0 {
			return who + " is idle after " + (time.Duration(t.Worked) * time.Second).String()
		}
		return who + " is idle"
	case "exit":
		return who + " exited"
	}
	return who + " " + fleet.Printable(t.State)
}

// body is the rest of the message: the agent's title, its directory and
// its host, each on a line of its own and each made printable.
func (t transition) body() string {
	var lines []string
	if t.Title != "" {
		lines = append(lines, fleet.Printable(t.Title))
	}
	if t.Cwd != "" {
		lines = append(lines, "in "+fleet.Printable(t.Cwd))
	}
	lines = append(lines, "on "+fleet.Printable(t.Shown))
	return strings.Join(lines, "\n")
}

// webhookBody is the JSON a webhook receives (documented in notify's help
// and the man page).
type webhookBody struct {
	ID      string `json:"id"`
	Host    string `json:"host"`
	Harness string `json:"harness"`
	PID     int    `json:"pid"`
	Started string `json:"started,omitempty"`
	State   string `json:"state"`
	Since   string `json:"since,omitempty"`
	Waiting string `json:"waiting,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Title   string `json:"title,omitempty"`
}

func (t transition) webhook() webhookBody {
	started := ""
	if t.Started > 0 {
		started = time.Unix(t.Started, 0).UTC().Format(time.RFC3339)
	}
	return webhookBody{
		ID: t.ID, Host: fleet.Printable(t.Shown), Harness: fleet.Printable(t.Harness), PID: t.PID, Started: started,
		State: t.State, Since: fleet.Printable(t.Since), Waiting: fleet.Printable(t.Waiting), Cwd: fleet.Printable(t.Cwd), Title: fleet.Printable(t.Title),
	}
}

// ntfyMessage is ntfy's JSON publish body (POST to the server's root).
type ntfyMessage struct {
	Topic    string   `json:"topic"`
	Title    string   `json:"title"`
	Message  string   `json:"message"`
	Tags     []string `json:"tags"`
	Priority int      `json:"priority"`
}

func (t transition) ntfy(target *pushTarget) ntfyMessage {
	prio, tag := 3, "zzz"
	switch t.State {
	case "waiting":
		prio, tag = 4, "raised_hand"
		if target.priority != 0 {
			prio = target.priority
		}
	case "exit":
		tag = "checkered_flag"
	}
	return ntfyMessage{Topic: target.topic, Title: t.summary(), Message: t.body(), Tags: []string{tag, fleet.Printable(t.Harness)}, Priority: prio}
}

// deliver sends t to target once; nil is delivered.
func deliver(ctx context.Context, target *pushTarget, t transition) error {
	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	switch target.kind {
	case "ntfy":
		return postJSON(ctx, strings.TrimSuffix(target.url, "/")+"/", target.token, t.ntfy(target))
	case "webhook":
		return postJSON(ctx, target.url, target.token, t.webhook())
	case "desktop":
		return desktopNotify(t)
	case "command":
		return runPushCommand(ctx, target.cmd, t)
	}
	return fmt.Errorf("unknown target kind %s", target.kind)
}

// pushHTTP is the client of every HTTP target: no redirect is followed,
// so that a token never goes to a server the config does not name.
var pushHTTP = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func postJSON(ctx context.Context, url, token string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "9harness-notify")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := pushHTTP.Do(req)
	if err != nil {
		// The error names the URL and the cause; the token is in a
		// header, which it never shows.
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// escapeMarkup quotes the characters the desktop notification spec's body
// markup gives a meaning to.
func escapeMarkup(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// desktopNotify calls org.freedesktop.Notifications.Notify on the session
// bus, on a connection of its own: a bus that restarted is found again.
func desktopNotify(t transition) error {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return fmt.Errorf("the session bus: %v", err)
	}
	defer conn.Close()
	icon, urgency := "dialog-information", byte(1)
	if t.State == "waiting" {
		icon, urgency = "dialog-question", 2
	}
	obj := conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications")
	call := obj.Call("org.freedesktop.Notifications.Notify", 0,
		"9harness", uint32(0), icon, t.summary(), escapeMarkup(t.body()), []string{},
		map[string]dbus.Variant{"urgency": dbus.MakeVariant(urgency), "category": dbus.MakeVariant("im.received")}, int32(-1))
	if call.Err != nil {
		return fmt.Errorf("org.freedesktop.Notifications: %v", call.Err)
	}
	return nil
}

// runPushCommand runs a command target as --notify runs its command: the
// facts in its environment only, /bin/sh -c CMD.
func runPushCommand(ctx context.Context, cmdline string, t transition) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline)
	a := client.Agent{Harness: t.Harness, PID: t.PID, State: t.State, Waiting: t.Waiting, Cwd: t.Cwd, Title: t.Title}
	cmd.Env = append(cli.NotifyCmdEnv(os.Environ(), a, t.Shown), "HARNESS_SINCE="+fleet.Printable(t.Since), "HARNESS_ID="+t.ID)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if last := lastLine(out); last != "" {
			return fmt.Errorf("%v: %s", err, fleet.Printable(last))
		}
		return err
	}
	return nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
