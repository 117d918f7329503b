//go:build redteam

package redteam

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/9harness/9harness/internal/client"
)

// The attackers that make the daemon hold memory (rule 10: every byte a
// peer can make the daemon hold is charged against a ceiling). The
// attacker is a grantee: this process, root, granted by --allow-uid 0 on
// a daemon of ownerUID; what it fills is what an agent can write in its
// own project (transcripts' directories), served in the grantee's view.

// granteeArgs are the flags of a daemon whose grantee is this process.
func granteeArgs(extra ...string) []string { return append([]string{"--allow-uid", "0"}, extra...) }

// dialSelf connects as this process (root: a grantee, or the owner of a
// daemon of uid 0) and attaches; before the attack a failure ends the
// test.
func dialSelf(t *testing.T, r *rig) *client.Client {
	t.Helper()
	c, err := trySelf(t, r)
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, tail(r.log.String(), 2000))
	}
	return c
}

// trySelf is dialSelf during the attack: a connection refused is
// one of the attack's outcomes.
func trySelf(t *testing.T, r *rig) (*client.Client, error) {
	c, err := client.Dial(r.sock)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// errCount counts errors by their text.
type errCount struct {
	mu sync.Mutex
	m  map[string]int
}

func (e *errCount) add(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]int{}
	}
	s := err.Error()
	// The kind, not the details: the text up to its first bracket, and
	// no socket path.
	if i := strings.IndexAny(s, "[("); i > 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "/tmp/"); i >= 0 {
		if j := strings.Index(s[i:], ".sock"); j > 0 {
			s = s[:i] + "SOCK" + s[i+j+5:]
		}
	}
	if len(s) > 70 {
		s = s[:70]
	}
	s = strings.TrimSpace(s)
	e.m[s]++
}

func (e *errCount) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.m) == 0 {
		return "none"
	}
	return fmt.Sprint(e.m)
}

// TestRedteamListingSnapshots: one grantee connection opens 100 fids on a
// directory of 50,000 names (255 bytes each) in an agent's project dir
// (the grantee sees /claude/projects) and reads the first entries of
// each: a listing snapshot held per open fid until clunk took 2.12 GB,
// and under the 512 MiB cgroup the daemon was OOM-killed at 40 fids.
//
// Guards rule 10: listings are charged to the connection.
func TestRedteamListingSnapshots(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, ownerUID)
	const names = 50000
	big := filepath.Join(w.home, ".claude", "projects", "-home-u-src-big")
	must(t, os.Mkdir(big, 0o755))
	for i := range names {
		// A transcript's name, as long as a name may be: the snapshot
		// holds each name (and its path).
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("%08x-%s.jsonl", i, strings.Repeat("x", 240))))
		must(t, err)
		f.Close()
	}
	r := startRig(t, "listing snapshots", ownerUID, w, granteeArgs()...)
	stop := r.ownerLists(250 * time.Millisecond)
	c := dialSelf(t, r)
	var mu sync.Mutex
	var held []*client.File
	var errs errCount
	var read, tried atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(45 * time.Second)
	// Four at a time: each first read makes the daemon list the whole
	// directory, and on 2 CPUs four keep both busy.
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tried.Add(1) <= 100 && !r.overCeiling() && time.Now().Before(deadline) {
				f, err := c.Walk("/claude/projects/-home-u-src-big")
				if err != nil {
					errs.add(err)
					continue
				}
				mu.Lock()
				held = append(held, f)
				mu.Unlock()
				if err := f.Open(client.ReadOnly); err != nil {
					errs.add(err)
					continue
				}
				if ents, err := f.Readdir(0, 4096); err != nil {
					errs.add(err)
				} else if len(ents) > 0 {
					read.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if time.Now().After(deadline) {
		r.note("stopped after 45 s")
	}
	stop()
	r.note("%d of 100 fids open with a first read; refusals: %v", read.Load(), errs.String())
	r.finish("1 grantee conn, 100 open fids on a 50,000-name dir")
	for _, f := range held {
		f.Close()
	}
}

// startAgent runs prog with args as uid, in cwd, with env only, and stops
// it (our own child) when the test ends.
func startAgent(t *testing.T, uid int, cwd string, env []string, prog string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = cwd
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// mkdirOwned makes dir (and any missing parent) and gives dir to uid.
func mkdirOwned(t *testing.T, dir string, uid int) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.Chown(dir, uid, uid))
}

// waitAgent waits until the grantee sees pid under /active/<h>.
func waitAgent(t *testing.T, r *rig, c *client.Client, h string, pid int) string {
	t.Helper()
	dir := "/active/" + h + "/" + strconv.Itoa(pid)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, _, err := c.Stat(dir); err == nil {
			return dir
		} else if time.Now().After(deadline) {
			t.Fatalf("%s never appeared: %v\n%s", dir, err, tail(r.log.String(), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRedteamSQLiteSnapshots: 8 grantee connections × 14 lookups at once
// of a Codex agent's title against a 180 MiB state_5.sqlite touched every
// 50 ms: a snapshot per lookup (each miss, since the file changes), none
// shared nor counted, took 12.4 GB in under 20 s, and the owner's `ls /`
// timed out 4 of 7 times.
//
// Guards rule 10: database images are shared and charged.
func TestRedteamSQLiteSnapshots(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, ownerUID)
	// state_5.sqlite: Codex 0.169's threads table, padded to 180 MiB.
	dbPath := filepath.Join(w.home, ".codex", "state_5.sqlite")
	os.Remove(dbPath) // the fixture's is a stand-in of a few bytes
	db, err := sql.Open("sqlite3", "file:"+dbPath)
	must(t, err)
	schema, err := os.ReadFile("../../internal/harness/testdata/codex/threads-0.169.0.sql")
	must(t, err)
	_, err = db.Exec(string(schema))
	must(t, err)
	_, err = db.Exec(`CREATE TABLE pad(b BLOB);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 180)
		INSERT INTO pad SELECT zeroblob(1048576) FROM n`)
	must(t, err)
	must(t, db.Close())
	must(t, os.Chown(dbPath, ownerUID, ownerUID))
	if fi, err := os.Stat(dbPath); err != nil || fi.Size() < 180<<20 {
		t.Fatalf("state_5.sqlite: %v, %d bytes", err, fi.Size())
	}

	cwd := filepath.Join(w.home, "src", "x")
	mkdirOwned(t, cwd, ownerUID)
	agent := startAgent(t, ownerUID, cwd, []string{"HOME=" + w.home, "PATH=/usr/bin:/bin", "FAKE_SESSION=019e8888-1111-7222-8333-444455556666"}, bin("codex"))
	r := startRig(t, "SQLite snapshots", ownerUID, w, granteeArgs()...)
	c := dialSelf(t, r)
	title := waitAgent(t, r, c, "codex", agent.Process.Pid) + "/title"

	// The database changes under the daemon every 50 ms, as a busy
	// Codex's does.
	quit := make(chan struct{})
	var touchers sync.WaitGroup
	touchers.Add(1)
	go func() {
		defer touchers.Done()
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			now := time.Now()
			os.Chtimes(dbPath, now, now)
		}
	}()
	stop := r.ownerLists(250 * time.Millisecond)
	var wg sync.WaitGroup
	var errs errCount
	var answered atomic.Int64
	for range 8 {
		c, err := trySelf(t, r)
		if err != nil {
			errs.add(err)
			continue
		}
		for range 14 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r.overCeiling() {
					return
				}
				_, err := c.ReadFile(title)
				errs.add(err)
				if err == nil {
					answered.Add(1)
				}
			}()
		}
	}
	waitOrCeiling(r, &wg, 30*time.Second)
	stop()
	close(quit)
	touchers.Wait()
	r.note("%d of 112 lookups answered; errors: %v", answered.Load(), errs.String())
	r.finish("8 grantee conns x 14 lookups of /active/codex/PID/title, 180 MiB db touched every 50 ms")
}

// waitOrCeiling waits for wg, or until the daemon is past the ceiling or
// gone (the attack has its answer), or for at most span.
func waitOrCeiling(r *rig, wg *sync.WaitGroup, span time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.After(span)
	for {
		select {
		case <-done:
			return
		case <-deadline:
			r.note("the attack's requests were still in flight after %v", span)
			return
		case <-time.After(100 * time.Millisecond):
			if r.overCeiling() {
				return
			}
		}
	}
}

// TestRedteamZstdTailBomb: a dsh log of 530-byte zstd frames that each
// inflate to 16 MiB. Every read of the agent's facts tried up to 64 frame
// starts of the tail window and decoded 16 MiB from each (4.5 s of CPU per
// read); 2 grantee connections × 8 reads at once: VmHWM 1.41 GB.
//
// Guards rule 10: decompressed bytes are bounded and charged, and derived
// work has a CPU bound.
func TestRedteamZstdTailBomb(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, ownerUID)
	cwd := filepath.Join(w.home, "src", "bomb")
	mkdirOwned(t, cwd, ownerUID)
	dir := filepath.Join(w.home, ".dsh", "sessions", "--"+strings.ReplaceAll(strings.TrimPrefix(cwd, "/"), "/", "-")+"--", "session-bomb")
	mkdirOwned(t, dir, ownerUID)
	log := filepath.Join(dir, "session.jsonl.zstd")
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	must(t, err)
	header := fmt.Sprintf(`{"type":"session","id":"bomb","createdAt":%d,"cwd":%q}`+"\n", time.Now().UnixMilli(), cwd)
	data := enc.EncodeAll([]byte(header), nil)
	bomb := enc.EncodeAll(bytes.Repeat([]byte("x"), 16<<20), nil)
	for len(data) < 2<<20 {
		data = append(data, bomb...)
	}
	must(t, os.WriteFile(log, data, 0o644))
	must(t, os.Chown(log, ownerUID, ownerUID))
	// A dsh-shaped process holding the log open: argv[0] "dsh", the log
	// on fd 3, as dsh's fd route finds it.
	agent := startAgent(t, ownerUID, cwd, []string{"PATH=/usr/bin:/bin", "LOG=" + log}, "/bin/bash", "-c", `exec 3<"$LOG"; exec -a dsh sleep 600`)
	r := startRig(t, "zstd tail bomb", ownerUID, w, granteeArgs()...)
	c := dialSelf(t, r)
	title := waitAgent(t, r, c, "dsh", agent.Process.Pid) + "/title"
	r.note("frames of %d bytes inflating to 16 MiB, a %d KiB log", len(bomb), len(data)>>10)

	stop := r.ownerLists(250 * time.Millisecond)
	var wg sync.WaitGroup
	var errs errCount
	var answered atomic.Int64
	for range 2 {
		c, err := trySelf(t, r)
		if err != nil {
			errs.add(err)
			continue
		}
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.ReadFile(title)
				errs.add(err)
				if err == nil {
					answered.Add(1)
				}
			}()
		}
	}
	waitOrCeiling(r, &wg, 30*time.Second)
	stop()
	r.note("%d of 16 reads answered; errors: %v", answered.Load(), errs.String())
	r.finish("2 grantee conns x 8 reads of /active/dsh/PID/title, 16 MiB zstd frames")
}

// TestRedteamFidCost: with directory names of 250 bytes 13 deep (one
// Twalk of 16 names from the root), one grantee's 8 connections walk
// fids until refused: each fid kept every node of its walk, each with its
// own path string, about 56 KiB a fid, and the 8 connections reached
// 4.29 GB.
//
// Guards rule 10: walk state is charged per fid; the fid cap is a byte cap.
func TestRedteamFidCost(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, ownerUID)
	names := []string{"claude", "projects", "-home-u-src-deep"}
	dir := filepath.Join(w.home, ".claude", "projects", "-home-u-src-deep")
	for i := range 13 {
		n := fmt.Sprintf("%c", 'a'+i) + strings.Repeat("d", 249)
		names = append(names, n)
		dir = filepath.Join(dir, n)
	}
	must(t, os.MkdirAll(dir, 0o755))
	r := startRig(t, "fid cost", ownerUID, w, granteeArgs()...)
	stop := r.ownerLists(250 * time.Millisecond)
	var wg sync.WaitGroup
	var errs errCount
	var walked atomic.Int64
	var quit atomic.Bool // the attack's span is over
	var heldMu sync.Mutex
	var held []*client.File
	path := "/" + strings.Join(names, "/")
	for range 8 {
		c, err := trySelf(t, r)
		if err != nil {
			errs.add(err)
			continue
		}
		var refused atomic.Bool
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !refused.Load() && !quit.Load() && !r.overCeiling() {
					f, err := c.Walk(path)
					if err != nil {
						errs.add(err)
						refused.Store(true)
						return
					}
					heldMu.Lock()
					held = append(held, f)
					heldMu.Unlock()
					walked.Add(1)
				}
			}()
		}
	}
	waitOrCeiling(r, &wg, 45*time.Second)
	quit.Store(true)
	stop()
	r.note("%d fids walked 16 names deep; refusals: %v", walked.Load(), errs.String())
	r.finish("1 grantee, 8 conns walking fids 16 names deep (250-byte names) to the cap")
	wg.Wait()
	for _, f := range held {
		f.Close()
	}
}
