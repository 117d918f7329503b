package saferoot

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/errs"
)

// A held view answers every Stat as the root does: the same facts for a
// file in the root, in a directory met once, and in one met often (then
// stat'ed from the view's held fd of the directory), the same refusals of
// links, credentials and special files, and never a fact older than the
// file: a file changed while the view is held is seen changed.
func TestHoldStatsAsRoot(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []Option) {
		base := t.TempDir()
		root := base + "/root"
		write(t, root+"/top.json", "top")
		write(t, root+"/sessions/1.json", "one")
		write(t, root+"/sessions/2.json", "two")
		write(t, root+"/sessions/auth.json", "secret")
		write(t, root+"/outside", "x")
		write(t, base+"/elsewhere", "far")
		mkdir(t, root+"/sessions/sub")
		symlink(t, "1.json", root+"/sessions/link.json")
		symlink(t, base+"/elsewhere", root+"/sessions/far.json")
		plain := New(root, opts...)
		a, err := OpenAnchor(base)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for _, r := range []*Root{plain, a.Root("root", opts...)} {
			v := r.Hold()
			// Twice each: the second Stat of a directory's file goes
			// through the held directory.
			for range 2 {
				for _, rel := range []string{"top.json", "sessions/1.json", "sessions/2.json", "sessions/sub", "sessions"} {
					want, err := r.Stat(rel)
					if err != nil {
						t.Fatal(err)
					}
					got, err := v.Stat(rel)
					if err != nil {
						t.Fatalf("held Stat %s: %v", rel, err)
					}
					if got != want {
						t.Errorf("held Stat %s = %+v, want %+v", rel, got, want)
					}
				}
				for _, rel := range []string{"sessions/link.json", "sessions/far.json", "sessions/absent.json"} {
					_, err := v.Stat(rel)
					wantKind(t, "held Stat "+rel, err, errs.NotExist)
				}
				_, err := v.Stat("sessions/auth.json")
				if err == nil {
					t.Error("held Stat sessions/auth.json: a credential-shaped name answered")
				}
			}
			if d := v.held.dirs["sessions"]; d == nil || d.fd < 0 || d.err != nil {
				t.Errorf("the view did not hold sessions/ after two Stats there: %+v", d)
			} else if d.mnt.id == 0 {
				t.Logf("no mount ids from this kernel: the held directory is not used")
			}
			// A change while held is seen at once.
			later := time.Now().Add(time.Hour)
			if err := os.WriteFile(root+"/sessions/1.json", []byte("changed"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(root+"/sessions/1.json", later, later)
			got, err := v.Stat("sessions/1.json")
			if err != nil || got.Size != int64(len("changed")) || !got.Mtime.Equal(later) {
				t.Errorf("held Stat after a change = %+v, %v: want size %d, mtime %v", got, err, len("changed"), later)
			}
			v.Release()
			// Released: it still answers, opening the root afresh.
			if _, err := v.Stat("sessions/2.json"); err != nil {
				t.Errorf("Stat after Release: %v", err)
			}
			v.Release() // twice is harmless
			write(t, root+"/sessions/1.json", "one")
		}
	})
}

// A held view keeps no descriptor past its Release.
func TestHoldNoFDLeak(t *testing.T) {
	base := t.TempDir()
	root := base + "/root"
	for _, n := range []string{"a", "b", "c"} {
		write(t, root+"/d/"+n, n)
	}
	before := countFDs(t)
	for range 3 {
		v := New(root).Hold()
		for range 2 {
			for _, n := range []string{"a", "b", "c", "absent"} {
				v.Stat("d/" + n)
			}
			v.Stat("d")
			if f, err := v.Open("d/a"); err == nil {
				f.Close()
			}
			v.ReadDir("d")
		}
		v.Release()
	}
	if after := countFDs(t); after != before {
		t.Errorf("descriptors: %d before, %d after", before, after)
	}
}

// A directory kept from one held view to the next is used only while its
// path still names it: the next view takes it at its first Stat (and the
// stat that proves it answers the directory's own Stat), a file changed in
// it is seen changed, and a directory replaced by another or by a link, or
// a root replaced, is met afresh (the link refused). Every kept fd is
// closed by the root's Close, a stale one as soon as no view uses it.
func TestHoldKeepsDirs(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []Option) {
		base := t.TempDir()
		root := base + "/root"
		write(t, root+"/projects/p1/s.jsonl", "one")
		write(t, base+"/far/s.jsonl", "far away")
		a, err := OpenAnchor(base)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		before := countFDs(t)
		r := a.Root("root", opts...)
		size := func(what string) int64 {
			t.Helper()
			v := r.Hold()
			defer v.Release()
			info, err := v.Stat("projects/p1/s.jsonl")
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return info.Size
		}
		if got := size("first view"); got != 3 {
			t.Fatalf("first view: size %d, want 3", got)
		}
		if r.keep.dirs["projects/p1"] == nil {
			t.Fatal("projects/p1 was not kept after the first view")
		}

		v := r.Hold()
		if info, err := v.Stat("projects/p1/s.jsonl"); err != nil || info.Size != 3 {
			t.Fatalf("second view: %+v, %v", info, err)
		}
		if d := v.held.dirs["projects/p1"]; d == nil || d.kept == nil {
			t.Fatalf("the second view did not take projects/p1 from the keeper: %+v", d)
		}
		got, err := v.Stat("projects/p1")
		if want, err2 := r.Stat("projects/p1"); err != nil || err2 != nil || got != want {
			t.Fatalf("the kept directory's own Stat = %+v, %v; want %+v, %v", got, err, want, err2)
		}
		v.Release()

		write(t, root+"/projects/p1/s.jsonl", "changed!")
		if got := size("after a change"); got != 8 {
			t.Errorf("after a change: size %d, want 8", got)
		}

		if err := os.Rename(root+"/projects/p1", root+"/projects/p1.old"); err != nil {
			t.Fatal(err)
		}
		write(t, root+"/projects/p1/s.jsonl", "new one")
		if got := size("after the directory was replaced"); got != 7 {
			t.Errorf("after the directory was replaced: size %d, want 7 (the new directory's file)", got)
		}

		if err := os.Rename(root+"/projects/p1", root+"/projects/p1.older"); err != nil {
			t.Fatal(err)
		}
		symlink(t, base+"/far", root+"/projects/p1")
		v = r.Hold()
		_, err = v.Stat("projects/p1/s.jsonl")
		wantKind(t, "Stat through a directory replaced by a link", err, errs.NotExist)
		v.Release()
		os.Remove(root + "/projects/p1")

		if err := os.Rename(root, base+"/root.old"); err != nil {
			t.Fatal(err)
		}
		write(t, root+"/projects/p1/s.jsonl", "a new root")
		if got := size("after the root was replaced"); got != 10 {
			t.Errorf("after the root was replaced: size %d, want 10", got)
		}

		r.Close()
		if after := countFDs(t); after != before {
			t.Errorf("descriptors: %d before, %d after the root's Close", before, after)
		}
	})
}

// The keeper holds no more than its bound, and still answers beyond it.
func TestHoldKeepsBounded(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		write(t, base+"/root/projects/"+p+"/s", p)
	}
	a, err := OpenAnchor(base)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := a.Root("root")
	defer r.Close()
	r.keep.max = 2
	for range 3 {
		v := r.Hold()
		for _, p := range []string{"p1", "p2", "p3", "p4"} {
			if info, err := v.Stat("projects/" + p + "/s"); err != nil || info.Size != 2 {
				t.Fatalf("%s: %+v, %v", p, info, err)
			}
		}
		v.Release()
		if n := len(r.keep.dirs); n > 2 {
			t.Fatalf("%d directories kept, bound 2", n)
		}
	}
}

// Many goroutines sharing one held view (a table read's workers) get the
// answers of the root itself: each directory settled once (opened, or
// taken from the keeper after its proof) whoever meets it first, and its
// parent settled under it; nothing is left open after Release and Close.
// Run with -race: the directories settle under their own locks.
func TestHoldConcurrent(t *testing.T) {
	eachMode(t, func(t *testing.T, opts []Option) {
		base := t.TempDir()
		const dirs, files = 40, 3
		for d := range dirs {
			for f := range files {
				write(t, fmt.Sprintf("%s/root/projects/p%d/s%d.jsonl", base, d, f), strings.Repeat("x", d*files+f))
			}
		}
		before := countFDs(t)
		a, err := OpenAnchor(base)
		if err != nil {
			t.Fatal(err)
		}
		r := a.Root("root", opts...)
		for range 3 { // the first view opens and keeps, the next ones adopt
			v := r.Hold()
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range dirs * files {
						// Each goroutine its own order, all meeting each
						// directory at about the same time.
						k := (i + g*7) % (dirs * files)
						d, f := k/files, k%files
						rel := fmt.Sprintf("projects/p%d/s%d.jsonl", d, f)
						info, err := v.Stat(rel)
						if err != nil || info.Size != int64(k) {
							t.Errorf("%s: %+v, %v; want size %d", rel, info, err, k)
							return
						}
						if info, err := v.Stat(fmt.Sprintf("projects/p%d", d)); err != nil || !info.Dir {
							t.Errorf("projects/p%d: %+v, %v", d, info, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			v.Release()
		}
		r.Close()
		a.Close()
		if after := countFDs(t); after != before {
			t.Errorf("descriptors: %d before, %d after", before, after)
		}
	})
}
