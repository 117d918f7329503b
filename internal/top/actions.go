package top

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
	"github.com/9harness/9harness/internal/harness/render"
)

// attachedMsg is the end of an attach: its error, and what it said.
type attachedMsg struct {
	err error
	out string
}

// attachArgv is the command that attaches to the agent's session: zmx
// attach, tmux attach on the agent's own tmux server, through ssh -t for
// another host; nil when nothing can be attached (its reason in why).
func (m *model) attachArgv(k key, a client.Agent) (argv []string, why string) {
	switch {
	case a.Zmx != "":
		argv = []string{"zmx", "attach", a.Zmx}
	case a.Tmux != "":
		argv = tmuxArgv(a.Tmux)
	default:
		reach := a.Reach
		if reach == "" {
			reach = "unknown"
		}
		return nil, "nothing to attach to: " + agentName(k) + " is in no zmx or tmux session (reach " + reach + "); m moves it into one"
	}
	h := m.hosts[k.host]
	if h == nil || h.dest == nil {
		return argv, ""
	}
	ssh := []string{"ssh", "-t"}
	for _, o := range h.dest.Options {
		ssh = append(ssh, "-o", o)
	}
	quoted := make([]string, len(argv))
	for i, w := range argv {
		quoted[i] = client.ShellQuote(w)
	}
	return append(ssh, h.dest.Dest, strings.Join(quoted, " ")), ""
}

// tmuxArgv attaches to the session the agent's tmux file names: SESSION
// (the default server), LABEL:SESSION (tmux -L) or /SOCKET:SESSION
// (tmux -S); split at the last ':', as the daemon does.
func tmuxArgv(v string) []string {
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return []string{"tmux", "attach", "-t", v}
	}
	flag, server := "-L", v[:i]
	if strings.HasPrefix(server, "/") {
		flag = "-S"
	}
	return []string{"tmux", flag, server, "attach", "-t", v[i+1:]}
}

// attach runs the attach command in the foreground, the view suspended,
// and comes back to the view when it detaches. A tmux inside tmux is
// what the user asked for here: $TMUX is dropped so that it does not
// refuse.
func (m *model) attach(k key) tea.Cmd {
	argv, why := m.attachArgv(k, m.agents[k])
	if argv == nil {
		m.status = why
		return nil
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "TMUX=") })
	// A tmux client draws on the terminal it has as stdin; on stdout and
	// stderr it writes only its last words ("[detached (from session
	// S)]", "can't find session"), which would stay on the screen the
	// view gives back at q: they go to the status line instead. Through
	// ssh or zmx the output is the session itself.
	var out *bytes.Buffer
	if argv[0] == "tmux" {
		out = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
	}
	return tea.ExecProcess(cmd, func(err error) tea.Msg {
		m := attachedMsg{err: err}
		if out != nil {
			m.out = strings.TrimSpace(out.String())
		}
		return m
	})
}

// copyResume copies the command that resumes the agent's session, as the
// daemon serves it in the agent's resume file (owner only), to the
// clipboard through OSC 52, and keeps it to print on exit for a terminal
// without a clipboard.
func (m *model) copyResume(k key) tea.Cmd {
	h := m.hosts[k.host]
	if h == nil || h.c == nil {
		m.status = "y: " + fleet.Printable(k.host) + " is not connected"
		return nil
	}
	c := h.c
	return func() tea.Msg {
		b, err := c.ReadFile(client.AgentDir(k.harness, k.pid) + "/resume")
		if err != nil {
			return statusMsg("y: the daemon serves no resume command for " + agentName(k) + ": " + fleet.Printable(fleet.Describe(err).Error()))
		}
		return copiedMsg(strings.TrimSpace(string(b)))
	}
}

type copiedMsg string

// osc52 is the escape that puts s on the terminal's clipboard.
func osc52(s string) string {
	return "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(s)) + "\x07"
}

// readDetail reads what the details show beyond the row: the last
// messages of the agent's conversation, as its daemon renders them in the
// agent's messages file; a daemon that serves none (an older one) gets
// the transcript read and rendered here.
func (m *model) readDetail(k key) tea.Cmd {
	h := m.hosts[k.host]
	a := m.agents[k]
	if h == nil || h.c == nil {
		return nil
	}
	c, path := h.c, a.Transcript
	return func() tea.Msg {
		b, err := c.ReadFile(client.AgentDir(k.harness, k.pid) + "/messages")
		switch {
		case err == nil:
			return detailMsg{k, messageLines(b, detailMessages)}
		case !client.IsErrno(err, syscall.ENOENT):
			return detailMsg{k, []string{"messages: " + fleet.Printable(fleet.Describe(err).Error())}}
		case path == "":
			return detailMsg{k, nil}
		}
		return detailMsg{k, transcriptTail(c, path, detailMessages)}
	}
}

// detailMessages is how many messages the details keep.
const detailMessages = 12

// messageLines is the last n lines of a messages file, each made
// printable again: the file is the daemon's, and a daemon of another
// host is trusted no further than its bytes.
func messageLines(b []byte, n int) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l != "" {
			out = append(out, fleet.Printable(l))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// transcriptTail reads the last 256 KiB of a transcript and renders its
// last n messages.
func transcriptTail(c *client.Client, path string, n int) []string {
	_, attr, err := c.Stat(path)
	if err != nil {
		return []string{"transcript: " + fleet.Describe(err).Error()}
	}
	r, err := c.Open(path)
	if err != nil {
		return []string{"transcript: " + fleet.Describe(err).Error()}
	}
	defer r.Close()
	const span = 256 << 10
	off := max(int64(attr.Size)-span, 0)
	buf := make([]byte, int64(attr.Size)-off)
	got := 0
	for got < len(buf) {
		k, err := r.ReadAt(buf[got:], off+int64(got))
		got += k
		if err != nil || k == 0 {
			break
		}
	}
	return render.Messages(buf[:got], off > 0, n)
}

// detailView is one agent: its facts, its sub-agents, and the last
// messages of its transcript. It fits the terminal's height: when it
// does not, the facts a person needs least (lessFacts) go first, then
// the oldest messages, down to detailMinMessages.
func (m *model) detailView(now time.Time) string {
	k := m.detailKey
	a, ok := m.agents[k]
	var b strings.Builder
	b.WriteString(styleHead.Render(clip(agentName(k)+" — "+fleet.Printable(a.Title), m.width)) + "\n\n")
	if !ok {
		b.WriteString("the agent is gone\n")
	}
	facts := [][2]string{
		{"host", k.host}, {"harness", a.Harness}, {"pid", strconv.Itoa(a.PID)}, {"ppid", strconv.Itoa(a.PPID)},
		{"started", startedText(a.Started, now)}, {"state", a.State}, {"waiting", a.Waiting}, {"since", a.Since},
		{"state.via", a.StateVia}, {"status", a.Status}, {"reach", a.Reach}, {"zmx", a.Zmx}, {"tmux", a.Tmux},
		{"cwd", a.Cwd}, {"session", a.Session}, {"name", a.Name}, {"model", a.Model}, {"via", a.Via},
		{"tokens", tokensText(a.Tokens)}, {"limits", fleet.LimitCell(a.Limits)}, {"transcript", a.Transcript},
		{"agents", strings.Join(a.Agents, " ")},
	}
	facts = slices.DeleteFunc(facts, func(f [2]string) bool { return f[1] == "" || f[1] == "0" })
	msgs := m.detail
	// Lines besides the facts and messages: the title and a blank line,
	// "the agent is gone", a blank line and the messages' heading, and
	// a blank line, the status and the keys.
	fixed := 2 + 3
	if !ok {
		fixed++
	}
	if len(msgs) > 0 {
		fixed += 2
	}
	if room := m.height - fixed; m.height > 0 && len(facts)+len(msgs) > room {
		keep := min(len(msgs), detailMinMessages)
		for _, name := range lessFacts {
			if len(facts)+keep <= room {
				break
			}
			facts = slices.DeleteFunc(facts, func(f [2]string) bool { return f[0] == name })
		}
		facts = facts[:min(len(facts), max(room-keep, 0))]
		msgs = msgs[len(msgs)-min(len(msgs), max(room-len(facts), keep)):]
	}
	for _, f := range facts {
		b.WriteString(clip(fmt.Sprintf("%-11s %s", f[0], fleet.Printable(f[1])), m.width) + "\n")
	}
	if len(msgs) > 0 {
		b.WriteString("\n" + styleHead.Render("last messages") + "\n")
		for _, l := range msgs {
			b.WriteString(clip(l, m.width) + "\n")
		}
	}
	b.WriteString("\n" + clip(m.status, m.width) + "\n")
	b.WriteString(clip("esc back  a attach", m.width))
	return b.String()
}

// lessFacts are the facts the details leave out, in turn, on a terminal
// too short for all of them: those the row or another fact already says,
// then those a person looks up least.
var lessFacts = []string{"ppid", "state.via", "status", "via", "transcript", "host", "started", "name", "since", "limits", "agents"}

// detailMinMessages is how many of the last messages the details keep on
// a short terminal, before facts beyond lessFacts are cut.
const detailMinMessages = 4

func startedText(s int64, now time.Time) string {
	if s <= 0 {
		return ""
	}
	return time.Unix(s, 0).Format(time.RFC3339) + " (" + fleet.Age(s, now) + " ago)"
}

func tokensText(t client.Tokens) string {
	var parts []string
	for _, k := range []string{"context", "input", "output", "cache_read", "cache_write"} {
		if n, ok := t[k]; ok {
			parts = append(parts, k+" "+fleet.CompactCount(n))
		}
	}
	return strings.Join(parts, ", ")
}
