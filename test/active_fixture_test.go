package test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"

	"github.com/9harness/9harness/internal/client"
)

// fixtureHomePath is how the committed fixtures name the fixture home.
const fixtureHomePath = "/home/goblin"

// TestActiveFixture: on the committed fixture process table testdata/proc
// over the fixture home, /active lists exactly the agents, fields, routes
// (via) and helper exclusions that testdata/active.want says, and then sees
// a reused pid for what it is.
func TestActiveFixture(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	fixtureTimeline(t, home)
	fixturePIDDomain(t, home)
	procs, pids := copyProcTable(t, "../testdata/proc", home)
	want := readActiveWant(t)

	d := startFixtureDaemon(t, home, procs, pids)
	c := d.client()

	if len(want) != 2 || want[0].root != "/active" || want[1].root != "/active/claude" {
		t.Fatalf("testdata/active.want: want sections /active and /active/claude, got %d", len(want))
	}
	compareActive(t, "committed table", want[0].lines, activeLines(t, c, "/active", home))

	// Looked up by name (not listed), a helper, a wrapper, a zombie or a
	// thread is not an agent either.
	for _, p := range []string{
		"/active/codex/61020",   // node …/codex.js: the wrapper of 61034
		"/active/codex/64100",   // codex app-server
		"/active/claude/345131", // claude --bg-spare
		"/active/claude/345160", // a zombie whose comm is claude
		"/active/claude/345105", // a thread of 345104
		"/active/hermes/1552",   // hermes gateway
		"/active/dsh/81300",     // dsh web
		"/active/pi/71500",      // omp's, not pi's
	} {
		if _, _, err := c.Stat(p); !isErrno(err, linux.ENOENT) {
			t.Errorf("stat %s: %v, want ENOENT", p, err)
		}
	}

	// Pid 345104 exits and another claude gets the pid: same pid, argv and
	// cwd, another start time. Its registry record is no longer believed.
	statPath := filepath.Join(procs, "345104", "stat")
	b, err := os.ReadFile(statPath)
	must(t, err)
	reused := regexp.MustCompile(`^(\d+ \(.*\) (?:\S+ ){19})50424 `).ReplaceAll(b, []byte("${1}4812345 "))
	if string(reused) == string(b) {
		t.Fatalf("%s: starttime 50424 not found in %q", statPath, b)
	}
	must(t, os.WriteFile(statPath, reused, 0o644))
	compareActive(t, "pid 345104 reused", want[1].lines, activeLines(t, c, "/active/claude", home))
}

// fixtureTimeline sets the mtimes of the copy's two sessions that ended
// long before the fixture processes started (omp's legacy January session,
// pi's November 2025 one) to the time of their last entry. A checkout gives
// every file the same checkout-time mtime, within a clock tick, in no
// reliable order, while the dir route takes the newest transcript of the
// cwd: without this the live session would be picked or not by chance.
func fixtureTimeline(t *testing.T, home string) {
	t.Helper()
	for rel, last := range map[string]string{
		".omp/agent/sessions/--home-goblin-src-x--/2026-01-15T09-30-00-000Z_Uakgb2uDcZ-9yQeLkAJxa.jsonl":               "2026-01-15T09:30:03Z",
		".pi/agent/sessions/--home-goblin-src-x--/2025-11-02T08-15-30-123Z_6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f.jsonl": "2025-11-02T08:15:31Z",
	} {
		ts, err := time.Parse(time.RFC3339, last)
		must(t, err)
		must(t, os.Chtimes(filepath.Join(home, rel), ts, ts))
	}
}

// fixturePIDDomain makes the modern Claude record name this machine's pid
// namespace, as Claude running here would have written it: the daemon
// compares the record's pidDomain with its own namespace.
func fixturePIDDomain(t *testing.T, home string) {
	t.Helper()
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return // the daemon cannot read it either, and then skips the check
	}
	p := filepath.Join(home, ".claude", "sessions", "345104.json")
	b, err := os.ReadFile(p)
	must(t, err)
	re := regexp.MustCompile(`"pidDomain":"[^"]*"`)
	if !re.Match(b) {
		t.Fatalf("%s has no pidDomain", p)
	}
	must(t, os.WriteFile(p, re.ReplaceAll(b, []byte(`"pidDomain":"linux::`+ns+`"`)), 0o600))
}

// copyProcTable copies the fixture process table into a temporary
// directory, rewriting every status Uid line to this test's uid, and every
// fd link into the fixture home (/home/goblin/…) to the copy of the home,
// so the fd route finds the roots the daemon serves. The cwd links and the
// environment keep /home/goblin: that is the directory the fixture home's
// own records (registry cwd, transcript headers, omp's home-relative dir
// names) name, and the dir route checks the process against them. It
// returns the copy and the set of its pids.
func copyProcTable(t *testing.T, src, home string) (string, map[int]bool) {
	t.Helper()
	dst := t.TempDir()
	uid := strconv.Itoa(os.Getuid())
	uidLine := regexp.MustCompile(`(?m)^Uid:.*$`)
	pids := map[int]bool{}
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		parts := strings.Split(rel, string(filepath.Separator))
		if pid, err := strconv.Atoi(parts[0]); err == nil && len(parts) == 1 {
			pids[pid] = true
		}
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if len(parts) == 3 && parts[1] == "fd" && (target == fixtureHomePath || strings.HasPrefix(target, fixtureHomePath+"/")) {
				target = home + strings.TrimPrefix(target, fixtureHomePath)
			}
			return os.Symlink(target, out)
		case de.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if de.Name() == "status" {
				b = uidLine.ReplaceAll(b, []byte("Uid:\t"+uid+"\t"+uid+"\t"+uid+"\t"+uid))
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
	if err != nil {
		t.Fatalf("copy the fixture process table: %v", err)
	}
	if len(pids) < 10 {
		t.Fatalf("the fixture process table holds only %d processes", len(pids))
	}
	return dst, pids
}

// startFixtureDaemon runs the daemon on the fixture table. The daemon
// never lists its own ancestry, looked up in the table it reads by its own
// (real) pid: a daemon whose pid is also a fixture pid would hide that
// fixture process, so such a daemon is restarted.
func startFixtureDaemon(t *testing.T, home, procs string, pids map[int]bool) *daemon {
	t.Helper()
	for try := 0; ; try++ {
		// HOME is the fixture home, as it is for the user whose daemon
		// it is: given to the daemon alone, so the test may run beside
		// others.
		d := startDaemonEnv(t, []string{"HOME=" + home}, home, "--proc", procs)
		if !pids[d.cmd.Process.Pid] {
			return d
		}
		if try == 20 {
			t.Fatalf("the daemon's pid keeps colliding with fixture pids")
		}
		d.stop()
	}
}

type wantSection struct {
	root  string
	lines []string
}

// readActiveWant reads testdata/active.want: sections that start with
// "== <root>", then one line per entry (see the file's head). A file line
// whose content is empty may have lost its tab to an editor: it is read
// back with the tab.
func readActiveWant(t *testing.T) []wantSection {
	t.Helper()
	f, err := os.Open("../testdata/active.want")
	must(t, err)
	defer f.Close()
	var out []wantSection
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "== "):
			out = append(out, wantSection{root: strings.TrimSpace(l[3:])})
		case len(out) == 0:
			t.Fatalf("testdata/active.want: %q before the first section", l)
		default:
			if !strings.HasSuffix(l, "/") && !strings.Contains(l, "\t") {
				l += "\t"
			}
			out[len(out)-1].lines = append(out[len(out)-1].lines, l)
		}
	}
	must(t, sc.Err())
	return out
}

// activeLines walks the tree below root through the client and renders
// every entry as active.want does.
func activeLines(t *testing.T, c *client.Client, root, home string) []string {
	t.Helper()
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := c.ReadDir(dir)
		if err != nil {
			t.Fatalf("readdir %s: %v", dir, err)
		}
		for _, e := range ents {
			p := dir + "/" + e.Name
			shown := strings.ReplaceAll(p, home, fixtureHomePath)
			if e.QID.IsDir() {
				out = append(out, shown+"/")
				walk(p)
				continue
			}
			b, err := c.ReadFile(p)
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			if e.Name == "transcript" {
				sum := sha256.Sum256(b)
				out = append(out, shown+"\t"+hex.EncodeToString(sum[:]))
				continue
			}
			out = append(out, shown+"\t"+escapeContent(strings.ReplaceAll(string(b), home, fixtureHomePath)))
		}
	}
	walk(root)
	sort.Strings(out)
	return out
}

var contentEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\t", `\t`)

func escapeContent(s string) string { return contentEscaper.Replace(s) }

func compareActive(t *testing.T, what string, want, got []string) {
	t.Helper()
	want = append([]string(nil), want...)
	sort.Strings(want)
	missing, extra := diffSets(want, got)
	if len(missing)+len(extra) == 0 {
		t.Logf("%s: %d entries as testdata/active.want says", what, len(got))
		return
	}
	var b strings.Builder
	for _, l := range missing {
		b.WriteString("\n  - " + l)
	}
	for _, l := range extra {
		b.WriteString("\n  + " + l)
	}
	t.Errorf("%s: /active differs from testdata/active.want (- want, + got):%s\nserved:\n  %s", what, b.String(), strings.Join(got, "\n  "))
}
