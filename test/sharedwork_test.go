package test

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/9harness/9harness/internal/client"
)

// The work a grantee makes the daemon do for an agent's facts is bounded
// and shared (rule 10): a grantee (this process, root, granted by
// --allow-uid 0) reads an agent's title again and again on many
// connections at once, against a daemon running as the test's owner uid with a real
// agent process of the test's owner uid, while the owner lists /. The daemon's VmRSS
// stays under boundsRSS and every owner's ls is answered. None asserts a
// time: the attacks' spans are bounds on a loaded machine.

// workSpan is how long each attack goes on.
const workSpan = 8 * time.Second

// startWorkRig is startBoundsRig with the machine's /proc (the agents are
// real processes) and the roots under home.
func startWorkRig(t *testing.T, home, sock string) *boundsRig {
	u := testUIDs(t)
	t.Helper()
	d := startAs(t, u.owner, home, sock, "--allow-uid", "0")
	return watchDaemon(t, d, sock)
}

// ownedWorkDir makes a directory next to home, owned by the test's owner uid: the
// agents' cwd.
func ownedWorkDir(t *testing.T, home string) string {
	u := testUIDs(t)
	t.Helper()
	work := filepath.Join(filepath.Dir(home), "work")
	must(t, os.Mkdir(work, 0o755))
	must(t, os.Chown(work, u.owner, u.owner))
	return work
}

// startAgent runs prog as the test's owner uid in dir with argv and extra fds, and
// stops it at the end of the test.
func startAgent(t *testing.T, prog string, argv []string, dir string, env []string, files ...*os.File) int {
	u := testUIDs(t)
	t.Helper()
	cmd := &exec.Cmd{Path: prog, Args: argv, Dir: dir, Env: env, ExtraFiles: files}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.owner), Gid: uint32(u.owner)}}
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// readAgain reads path on conns connections, per at once on each, until
// span has passed or the daemon's memory passed the bound; it returns the
// reads answered and the last error.
func (r *boundsRig) readAgain(path string, conns, per int, span time.Duration) (int, error) {
	r.t.Helper()
	var mu sync.Mutex
	n := 0
	var last error
	deadline := time.Now().Add(span)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		c, err := client.Dial(r.sock)
		if err != nil {
			r.t.Fatalf("grantee connection %d: %v", i, err)
		}
		defer c.Close()
		for j := 0; j < per; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && !r.overLimit() {
					_, err := c.ReadFile(path)
					mu.Lock()
					if err == nil {
						n++
					} else {
						last = err
					}
					mu.Unlock()
					if err != nil && !strings.Contains(err.Error(), "no such file") {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}
	wg.Wait()
	return n, last
}

// A dsh log of frames of some 500 bytes that each inflate to 16 MiB of
// zeros: the daemon tried 64 frame starts of its tail window, decoding
// 16 MiB from each, seconds of CPU per read by any peer; two connections
// of eight reads at once drove it past 1.4 GB.
func TestBoundsZstdTail(t *testing.T) {
	u := testUIDs(t)
	requireRoot(t)
	home, sock := sharedHome(t, u.owner)
	work := ownedWorkDir(t, home)
	dir := filepath.Join(home, ".dsh", "sessions", "--"+strings.ReplaceAll(strings.TrimLeft(work, "/"), "/", "-")+"--",
		"session-0190aaaa-0000-7000-8000-000000000001")
	must(t, os.MkdirAll(dir, 0o755))
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(1<<20), zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	must(t, err)
	log := enc.EncodeAll([]byte(`{"type":"session","id":"0190aaaa-0000-7000-8000-000000000001","createdAt":1,"cwd":"`+work+`"}`+"\n"), nil)
	frame := enc.EncodeAll(make([]byte, 16<<20), nil)
	enc.Close()
	for len(log) < 5<<19 {
		log = append(log, frame...)
	}
	path := filepath.Join(dir, "session.jsonl.zstd")
	must(t, os.WriteFile(path, log, 0o644))
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	// dsh as its process looks, holding its log open.
	pid := startAgent(t, "/bin/sleep", []string{"dsh", "infinity"}, work, nil, f)

	r := startWorkRig(t, home, sock)
	c, err := client.Dial(sock)
	must(t, err)
	via, err := c.ReadFile(fmt.Sprintf("/active/dsh/%d/via", pid))
	c.Close()
	if err != nil || strings.TrimSpace(string(via)) != "fd" {
		t.Fatalf("the agent's via: %q, %v; want fd", via, err)
	}
	var reads int
	r.underAttack(func() func() {
		reads, err = r.readAgain(fmt.Sprintf("/active/dsh/%d/title", pid), 2, 8, workSpan)
		return nil
	})
	t.Logf("%d title reads in %v (last error: %v)", reads, workSpan, err)
}

// A Codex state database of 64 MiB that a writer commits to every 50 ms:
// the daemon took a snapshot of it for every request (the files changed
// between any two), none shared, none charged; eight connections of
// fourteen reads at once drove it past 12 GB.
func TestBoundsDatabaseChurn(t *testing.T) {
	u := testUIDs(t)
	requireRoot(t)
	home, sock := sharedHome(t, u.owner)
	work := ownedWorkDir(t, home)
	must(t, exec.Command("chown", "-R", fmt.Sprintf("%d:%d", u.owner, u.owner), home).Run())
	const sid = "0190bbbb-0000-7000-8000-000000000042"
	pid := startAgent(t, bin("codex"), []string{"codex"}, work,
		[]string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_SESSION=" + sid})
	var rollout string
	for deadline := time.Now().Add(10 * time.Second); rollout == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*"+sid+".jsonl"))
		if len(m) > 0 {
			rollout = m[0]
		}
	}
	if rollout == "" {
		t.Fatal("the fake codex wrote no rollout")
	}

	dbPath := filepath.Join(home, ".codex", "state_5.sqlite")
	must(t, os.Remove(dbPath)) // the fixtures' stand-in
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_pragma=journal_mode(wal)&_pragma=busy_timeout(5000)")
	must(t, err)
	db.SetMaxOpenConns(1)
	defer db.Close()
	exec1 := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec1(`CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT, cwd TEXT, title TEXT, name TEXT, model TEXT, source TEXT, created_at_ms INTEGER, agent_path TEXT, attached_thread_parent_id TEXT)`)
	exec1(`CREATE TABLE filler (id INTEGER PRIMARY KEY, pad BLOB)`)
	exec1(`INSERT INTO threads (id, rollout_path, cwd, title, model, source, created_at_ms) VALUES (?, ?, ?, 'churn 0', 'gpt-x', 'cli', ?)`,
		sid, rollout, work, time.Now().UnixMilli())
	exec1(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1024) INSERT INTO filler (pad) SELECT randomblob(65000) FROM n`)
	exec1(`PRAGMA wal_checkpoint(TRUNCATE)`)
	for _, n := range []string{"", "-wal", "-shm"} {
		os.Chmod(dbPath+n, 0o644)
	}
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			db.Exec(`UPDATE threads SET title = ? WHERE id = ?`, fmt.Sprintf("churn %d", i), sid)
		}
	}()
	defer func() { close(stop); <-wrote }()

	r := startWorkRig(t, home, sock)
	title := fmt.Sprintf("/active/codex/%d/title", pid)
	c, err := client.Dial(sock)
	must(t, err)
	got, err := c.ReadFile(title)
	c.Close()
	if err != nil || !strings.HasPrefix(string(got), "churn ") {
		t.Fatalf("the agent's title: %q, %v; want the database's", got, err)
	}
	var reads int
	r.underAttack(func() func() {
		reads, err = r.readAgain(title, 8, 14, workSpan)
		return nil
	})
	t.Logf("%d title reads in %v (last error: %v)", reads, workSpan, err)
	if reads == 0 {
		t.Errorf("no title read was answered: %v", err)
	}
}
