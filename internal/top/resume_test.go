package top

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/ninep"
	"github.com/9harness/9harness/internal/tree"
)

// serveActive serves a tree with /active/claude/7/resume holding line
// (no resume file when line is ""), and returns a client of it.
func serveActive(t *testing.T, line string) *client.Client {
	t.Helper()
	now := time.Now()
	var files []tree.Child
	if line != "" {
		files = append(files, tree.Child{Name: "resume", Make: func() (tree.Node, error) {
			return tree.NewGen("/active/claude/7/resume", func() time.Time { return now }, func() []byte { return []byte(line + "\n") }), nil
		}})
	}
	dir := func(p string, cs ...tree.Child) func() (tree.Node, error) {
		return func() (tree.Node, error) { return tree.NewStatic(p, now, cs...), nil }
	}
	root := tree.NewStatic("/", now, tree.Child{Name: "active", Make: dir("/active",
		tree.Child{Name: "claude", Make: dir("/active/claude",
			tree.Child{Name: "7", Make: dir("/active/claude/7", files...)})})})
	srv, cli := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ninep.Serve(ctx, srv, ninep.Conn{Root: root, MaxMsize: 1 << 16})
	}()
	c, err := client.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); cancel(); <-done })
	return c
}

// TestCopyResume: y reads the selected agent's resume file from its host
// and copies exactly that line: to the clipboard through OSC 52 and to be
// printed on exit. Where the daemon serves none, it says so and copies
// nothing.
func TestCopyResume(t *testing.T) {
	const line = `cd '/home/u/it'\''s' && claude --resume 1f9a74f7-3c2e-4d51-9a0b-6f2d8c1e7a55 --model opus`
	for _, served := range []string{line, ""} {
		m := testModel("-")
		m.hosts["-"].c = serveActive(t, served)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		m.cfg.Out = w
		m.put("-", client.Agent{Harness: "claude", PID: 7, State: "idle"})
		m.resort()
		_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("y")})
		if cmd == nil {
			t.Fatal("y made no read")
		}
		_, cmd = m.Update(cmd())
		if served == "" {
			if cmd != nil || m.printOnExit != "" || !strings.Contains(m.status, "serves no resume command") {
				t.Errorf("no resume file: status %q, copied %q", m.status, m.printOnExit)
			}
			w.Close()
			r.Close()
			continue
		}
		if cmd == nil {
			t.Fatal("the copy wrote nothing")
		}
		cmd()
		w.Close()
		out, _ := io.ReadAll(r)
		r.Close()
		if want := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(line)) + "\x07"; string(out) != want {
			t.Errorf("OSC 52 %q, want %q", out, want)
		}
		if m.printOnExit != line {
			t.Errorf("printed on exit %q, want %q", m.printOnExit, line)
		}
	}
}
