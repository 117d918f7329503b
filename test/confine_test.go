package test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hugelgupf/p9/linux"
	"golang.org/x/sys/unix"
)

// TestSpecialFilesUnreachable: a symlink (to a file, to a directory,
// mid-path), a fifo, a socket and a device node inside a served root are
// neither listed nor opened, and a fifo never blocks the daemon.
//
// Guards rule 1: no byte from outside the roots.
func TestSpecialFilesUnreachable(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	dsh := filepath.Join(home, ".dsh")
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE"), 0o644)
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dsh, "filelink")))
	must(t, os.Symlink(outside, filepath.Join(dsh, "dirlink")))
	must(t, os.Symlink("/etc", filepath.Join(dsh, "etc")))
	must(t, unix.Mkfifo(filepath.Join(dsh, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(dsh, "sock"))
	must(t, err)
	defer l.Close()
	specials := []string{"filelink", "dirlink", "dirlink/secret", "etc", "etc/passwd", "fifo", "sock"}
	if os.Getuid() == 0 {
		must(t, unix.Mknod(filepath.Join(dsh, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		specials = append(specials, "null")
	} else {
		t.Log("not root: no device node")
	}

	d := startDaemon(t, home)
	c := d.client()
	ents, err := c.ReadDir("/dsh")
	must(t, err)
	for _, e := range ents {
		for _, s := range specials {
			if e.Name == s {
				t.Errorf("%s is listed", s)
			}
		}
	}
	for _, s := range specials {
		done := make(chan error, 1)
		go func() {
			_, err := c.ReadFile("/dsh/" + s)
			done <- err
		}()
		select {
		case err := <-done:
			if !isErrno(err, linux.ENOENT) {
				t.Errorf("read /dsh/%s: %v, want ENOENT", s, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("read /dsh/%s blocked", s)
		}
		if out, err := d.diod("diodcat", "dsh/"+s); err == nil || bytes.Contains(out, []byte("OUTSIDE")) {
			t.Errorf("diodcat dsh/%s succeeded", s)
		}
	}
}

// TestNames: names with '/', '.', '..' and NUL are refused; the tree never
// lets a name become more than one host path component.
//
// Guards rule 1: no byte from outside the roots.
func TestNames(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	d := startDaemon(t, home)
	c := d.client()
	root, err := c.Walk("/")
	must(t, err)
	defer root.Close()
	for _, name := range []string{"dsh/profiles", "..", ".", "dsh\x00", "", "/"} {
		if f, err := root.Walk([]string{name}); err == nil {
			f.Close()
			t.Errorf("walk %q: succeeded", name)
		}
	}
	dir, err := c.Walk("/dsh")
	must(t, err)
	defer dir.Close()
	for _, name := range []string{"..", "profiles/default", "profiles\x00"} {
		if f, err := dir.Walk([]string{name}); err == nil {
			f.Close()
			t.Errorf("walk /dsh %q: succeeded", name)
		}
	}
}

// TestSymlinkSwapRace is rule 1 under load: while a goroutine swaps a
// served directory with a symlink to an outside directory (and a served file
// with a symlink to an outside file) as fast as it can, thousands of reads
// through the daemon never return one byte from outside.
func TestSymlinkSwapRace(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	base := filepath.Join(home, ".dsh", "race")
	outside := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(base, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(base, "d", "f"), []byte("inside\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "g"), []byte("inside\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(outside, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "d", "f"), []byte("OUTSIDE\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "g"), []byte("OUTSIDE\n"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "d"), filepath.Join(base, "dlink")))
	must(t, os.Symlink(filepath.Join(outside, "g"), filepath.Join(base, "glink")))

	d := startDaemon(t, home)
	c := d.client()
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, pair := range [][2]string{{"d", "dlink"}, {"g", "glink"}} {
				if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(base, pair[0]), unix.AT_FDCWD, filepath.Join(base, pair[1]), unix.RENAME_EXCHANGE); err == nil {
					swaps.Add(1)
				}
			}
		}
	}()
	const iterations = 3000
	var ok, failed int
	for i := 0; i < iterations; i++ {
		for _, p := range []string{"/dsh/race/d/f", "/dsh/race/g", "/dsh/race/dlink/f", "/dsh/race/glink"} {
			b, err := c.ReadFile(p)
			if err != nil {
				failed++
				continue
			}
			ok++
			if bytes.Contains(b, []byte("OUTSIDE")) {
				close(stop)
				wg.Wait()
				t.Fatalf("iteration %d: %s served bytes from outside the root: %q", i, p, b)
			}
		}
	}
	close(stop)
	wg.Wait()
	if ok == 0 || swaps.Load() == 0 {
		t.Fatalf("the race never ran: %d reads succeeded, %d swaps", ok, swaps.Load())
	}
	t.Logf("%d reads served inside bytes, %d refused, %d swaps, 0 outside bytes", ok, failed, swaps.Load())
}

// TestBigDirectory: a 10,000-entry directory lists completely through
// diodls and the client.
//
// Guards rule 10: bounded memory, fids, requests and connections.
func TestBigDirectory(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	dir := filepath.Join(home, ".hermes", "big")
	must(t, os.Mkdir(dir, 0o755))
	const n = 10000
	for i := 0; i < n; i++ {
		must(t, unix.Mknod(filepath.Join(dir, fmt.Sprintf("entry-%05d.jsonl", i)), unix.S_IFREG|0o644, 0))
	}
	d := startDaemon(t, home)
	out, err := d.diod("diodls", "hermes/big")
	must(t, err)
	names := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	seen := map[string]bool{}
	for _, s := range names {
		seen[s] = true
	}
	if len(names) != n || len(seen) != n {
		t.Fatalf("diodls listed %d names (%d distinct), want %d", len(names), len(seen), n)
	}
	ents, err := d.client().ReadDir("/hermes/big")
	must(t, err)
	if len(ents) != n {
		t.Fatalf("client listed %d, want %d", len(ents), n)
	}
}

// TestBigFile: a 100 MB file reads back identical with diodcat and with the
// project's client.
func TestBigFile(t *testing.T) {
	t.Parallel()
	home := fixtureHome(t)
	p := filepath.Join(home, ".dsh", "big.bin")
	f, err := os.Create(p)
	must(t, err)
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for i := 0; i < 100; i++ {
		rand.Read(buf)
		f.Write(buf)
		h.Write(buf)
	}
	f.Close()
	want := fmt.Sprintf("%x", h.Sum(nil))
	d := startDaemon(t, home)

	out, err := d.diod("diodcat", "dsh/big.bin")
	must(t, err)
	if got := fmt.Sprintf("%x", sha256.Sum256(out)); got != want || len(out) != 100<<20 {
		t.Fatalf("diodcat: %d bytes, sha256 %s, want %s", len(out), got, want)
	}
	b, err := d.client().ReadFile("/dsh/big.bin")
	must(t, err)
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
		t.Fatalf("client: %d bytes, sha256 %s, want %s", len(b), got, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ = syscall.ENOENT
