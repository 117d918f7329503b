package saferoot

import (
	"os"
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
