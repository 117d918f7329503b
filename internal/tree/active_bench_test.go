package tree

import (
	"os"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// benchActive is /active over a fixture table of 2,000 processes, 500 of
// them claude agents (no harness files: the cost measured is the table's).
func benchActive(b *testing.B) *activeRoot {
	dir := b.TempDir()
	uid := uint32(os.Getuid())
	var ps []proctest.Proc
	for pid := 2; pid < 2002; pid++ {
		p := proctest.Proc{PID: pid, PPID: 1, UID: uid, Start: uint64(pid), Argv: []string{"sleep", "600"}, Cwd: "/"}
		if pid%4 == 0 {
			p.Argv = []string{"claude", "600"}
		}
		ps = append(ps, p)
	}
	if err := proctest.Write(dir, ps...); err != nil {
		b.Fatal(err)
	}
	t := proc.New(dir)
	envs := map[string]harness.Env{}
	for _, h := range Harnesses {
		envs[h] = harness.Env{Procs: t, Home: dir, TmpDir: dir}
	}
	return newActive(ActiveConfig{Procs: t, UID: uid, Envs: envs}, time.Now()).root()
}

// walkActive lists /active as the bench's client does; with fields it also
// walks to, stats, opens and reads every field of every agent.
func walkActive(b *testing.B, r *activeRoot, fields bool) (agents int) {
	hs, err := r.List()
	if err != nil {
		b.Fatal(err)
	}
	for _, h := range hs {
		n, _ := r.Lookup(h.Name)
		hd := n.(Dir)
		pids, err := hd.List()
		if err != nil {
			b.Fatal(err)
		}
		agents += len(pids)
		if !fields {
			continue
		}
		for _, p := range pids {
			n, err := hd.Lookup(p.Name)
			if err != nil {
				b.Fatal(err)
			}
			ents, err := n.(Dir).List()
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range ents {
				if e.Dir || e.Name == "transcript" {
					continue
				}
				// A 9P walk from the root: every component again.
				hn, _ := r.Lookup(h.Name)
				an, err := hn.(Dir).Lookup(p.Name)
				if err != nil {
					b.Fatal(err)
				}
				fn, err := an.(Dir).Lookup(e.Name)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := fn.Attr(); err != nil {
					b.Fatal(err)
				}
				hd, err := fn.(File).Open()
				if err != nil {
					b.Fatal(err)
				}
				var buf [256]byte
				hd.ReadAt(buf[:], 0)
				hd.Close()
			}
		}
	}
	return agents
}

func BenchmarkActiveNames(b *testing.B) {
	r := benchActive(b)
	for b.Loop() {
		if n := walkActive(b, r, false); n != 500 {
			b.Fatalf("%d agents", n)
		}
	}
}

func BenchmarkActiveListing(b *testing.B) {
	r := benchActive(b)
	for b.Loop() {
		if n := walkActive(b, r, true); n != 500 {
			b.Fatalf("%d agents", n)
		}
	}
}
