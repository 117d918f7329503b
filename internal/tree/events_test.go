package tree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/proc"
)

// openEvents opens /active/events under r.
func openEvents(t *testing.T, r *activeRoot) *eventReader {
	t.Helper()
	n, err := r.Lookup(eventsName)
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.(File).Open()
	if err != nil {
		t.Fatal(err)
	}
	return h.(*eventReader)
}

// readLine reads from h until a whole line has come, or d passes.
func readLines(t *testing.T, h *eventReader, d time.Duration, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got string
	buf := make([]byte, 4096)
	for strings.Count(got, "\n") < want {
		n, err := h.ReadAtContext(ctx, buf, 0)
		if err != nil {
			t.Fatalf("read after %q: %v", got, err)
		}
		got += string(buf[:n])
	}
	return strings.Split(strings.TrimSuffix(got, "\n"), "\n")
}

var lineRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (\S+) (\S+) (\S+)(?: (.*))?$`)

// A rewrite of a Claude agent's registry status is a line naming the new
// state (and what it waits for), seen through inotify well before the
// rescan would; the watcher runs only while the file is open.
func TestEventsStateChange(t *testing.T) {
	r, croot := tableFixture(t, 2, nil)
	if r.a.events.running() {
		t.Fatal("watcher runs with no reader")
	}
	h := openEvents(t, r)
	if !r.a.events.running() {
		t.Fatal("watcher not started by the first open")
	}
	reg := filepath.Join(croot, "sessions", "100.json")
	rec := func(status, extra string) {
		s := fmt.Sprintf(`{"pid":100,"sessionId":"00000000-0000-4000-8000-000000000100","cwd":"/w","startedAt":1,"procStart":"100","status":%q%s,"name":"n100"}`, status, extra)
		if err := os.WriteFile(reg, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ status, extra, want string }{
		{"waiting", `,"waitingFor":"approve Bash"`, "claude 100 waiting approve Bash"},
		{"idle", "", "claude 100 idle"},
		{"busy", "", "claude 100 working"},
	} {
		began := time.Now()
		rec(c.status, c.extra)
		lines := readLines(t, h, 10*time.Second, 1)
		m := lineRE.FindStringSubmatch(lines[0])
		if m == nil || !strings.HasSuffix(lines[0], " "+c.want) {
			t.Fatalf("line %q, want … %s", lines[0], c.want)
		}
		if d := time.Since(began); d > eventsRescan/2 {
			// inotify, not the rescan, found it.
			t.Errorf("%s seen after %v", c.status, d)
		}
	}
	h.Close()
	deadline := time.Now().Add(5 * time.Second)
	for r.a.events.running() {
		if time.Now().After(deadline) {
			t.Fatal("watcher still runs after the last close")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A read with nothing to say blocks until its context ends.
func TestEventsReadBlocksUntilCancel(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	h := openEvents(t, r)
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.ReadAtContext(ctx, make([]byte, 100), 0)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("read returned before cancel: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("read: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read not released by cancel")
	}
}

// A reader that does not read keeps only the newest eventsBuffer lines,
// and is first told how many it lost.
func TestEventsLost(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	h := openEvents(t, r)
	defer h.Close()
	const extra = 7
	for i := 0; i < eventsBuffer+extra; i++ {
		r.a.events.post(eventLine(time.Now(), "claude", 1000+i, "idle", ""))
	}
	h.mu.Lock()
	held := len(h.lines)
	h.mu.Unlock()
	if held != eventsBuffer {
		t.Fatalf("reader holds %d lines, want %d", held, eventsBuffer)
	}
	lines := readLines(t, h, time.Second, 2)
	if !strings.HasSuffix(lines[0], fmt.Sprintf(" - - lost %d", extra)) {
		t.Fatalf("first line %q, want the lost line", lines[0])
	}
	if !strings.HasSuffix(lines[1], fmt.Sprintf(" claude %d idle", 1000+extra)) {
		t.Fatalf("second line %q, want the oldest kept", lines[1])
	}
}

// A short read cuts a line and the next read gives its rest.
func TestEventsShortRead(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	h := openEvents(t, r)
	defer h.Close()
	r.a.events.post(eventLine(time.Now(), "claude", 1, "waiting", "approve Bash"))
	r.a.events.post(eventLine(time.Now(), "claude", 2, "idle", ""))
	var got string
	buf := make([]byte, 7)
	for strings.Count(got, "\n") < 2 {
		n, err := h.ReadAtContext(context.Background(), buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		got += string(buf[:n])
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "claude 1 waiting approve Bash") || !strings.HasSuffix(lines[1], "claude 2 idle") {
		t.Fatalf("got %q", got)
	}
}

func TestEventsDiff(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	k := func(pid int) eventKey { return eventKey{"claude", pid, uint64(pid)} }
	for _, c := range []struct {
		name      string
		prev, cur map[eventKey]eventState
		want      []string
	}{
		{"nothing", map[eventKey]eventState{k(1): {state: "idle"}}, map[eventKey]eventState{k(1): {state: "idle"}}, nil},
		{"appear with state", nil, map[eventKey]eventState{k(1): {state: "working"}},
			[]string{"claude 1 appear", "claude 1 working"}},
		{"appear unknown", nil, map[eventKey]eventState{k(1): {}}, []string{"claude 1 appear"}},
		{"exit", map[eventKey]eventState{k(1): {state: "idle"}}, nil, []string{"claude 1 exit"}},
		{"pid reused", map[eventKey]eventState{k(1): {state: "idle"}}, map[eventKey]eventState{{"claude", 1, 9}: {}},
			[]string{"claude 1 exit", "claude 1 appear"}},
		{"waits for another", map[eventKey]eventState{k(1): {state: "waiting", waiting: "approve Bash"}},
			map[eventKey]eventState{k(1): {state: "waiting", waiting: "approve Edit"}}, []string{"claude 1 waiting approve Edit"}},
		{"becomes unknown", map[eventKey]eventState{k(1): {state: "idle"}}, map[eventKey]eventState{k(1): {}}, nil},
		{"multiline what", nil, map[eventKey]eventState{k(2): {state: "waiting", waiting: "a\nb"}},
			[]string{"claude 2 appear", "claude 2 waiting a b"}},
	} {
		var got []string
		for _, l := range diff(c.prev, c.cur, now) {
			s := string(l)
			if !strings.HasPrefix(s, "2026-12-01T10:00:00Z ") || !strings.HasSuffix(s, "\n") {
				t.Errorf("%s: line %q", c.name, s)
			}
			got = append(got, strings.TrimSuffix(strings.TrimPrefix(s, "2026-12-01T10:00:00Z "), "\n"))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// Opens and closes in a row restart the watcher each time, and a reader
// opened after a restart is served.
func TestEventsRestart(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	for i := 0; i < 20; i++ {
		h := openEvents(t, r)
		if i%5 == 4 {
			time.Sleep(eventsRescan + 100*time.Millisecond) // the watcher runs a derivation
		}
		h.Close()
	}
	h := openEvents(t, r)
	defer h.Close()
	r.a.events.post(eventLine(time.Now(), "claude", 1, "idle", ""))
	if l := readLines(t, h, time.Second, 1); !strings.HasSuffix(l[0], "claude 1 idle") {
		t.Fatalf("line %q", l[0])
	}
}

type okMover struct{}

func (okMover) Move(context.Context, Writer, string, proc.Proc, string, []byte) error { return nil }

// A completed move through an agent's zmx file is a moved line naming
// where to.
func TestEventsMoved(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	r.a.cfg.Mover = okMover{}
	h := openEvents(t, r)
	defer h.Close()
	hd, err := r.Lookup("claude")
	if err != nil {
		t.Fatal(err)
	}
	ad, err := hd.(Dir).Lookup("100")
	if err != nil {
		t.Fatal(err)
	}
	n, err := ad.(Dir).Lookup("zmx")
	if err != nil {
		t.Fatal(err)
	}
	w, ok := n.(Writable)
	if !ok {
		t.Fatalf("zmx is %T, not writable", n)
	}
	if err := w.Write(context.Background(), Writer{}, []byte("rescued")); err != nil {
		t.Fatal(err)
	}
	if l := readLines(t, h, time.Second, 1); !strings.HasSuffix(l[0], " claude 100 moved zmx rescued") {
		t.Fatalf("line %q", l[0])
	}
}

// An events reader holds at most its queue full of the longest lines:
// Held reports that bound, which the adapters charge while it is open,
// and no line is longer than eventsLineMax.
func TestEventsHeldBound(t *testing.T) {
	r, _ := tableFixture(t, 1, nil)
	h := openEvents(t, r)
	defer h.Close()
	if got := Held(h); got != eventsBuffer*eventsLineMax {
		t.Fatalf("Held %d, want %d", got, eventsBuffer*eventsLineMax)
	}
	l := eventLine(time.Now(), "opencode", 1<<31-1, EventAppear, strings.Repeat("\u00e9", 400))
	if len(l) > eventsLineMax {
		t.Fatalf("a line of %d bytes, above eventsLineMax (%d)", len(l), eventsLineMax)
	}
	if got := Held(snapshot{bytesReader([]byte("12345"))}); got != 5 {
		t.Fatalf("a snapshot of 5 bytes: Held %d", got)
	}
}
