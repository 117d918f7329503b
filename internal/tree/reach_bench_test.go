package tree

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/harness"
	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

// benchReachTable is /active over a fixture table of 2,000 processes of
// the uid, 100 of them claude agents, each at a terminal of its own:
// none ("none"), one its parent shell shares ("shell"), or one only a
// terminal window holds the master of ("window": every agent's reach
// reads the stat of every process and the descriptors of each until the
// window's).
func benchReachTable(b *testing.B, kind string) *activeRoot {
	dir := b.TempDir()
	uid := uint32(os.Getuid())
	const pts = 136 << 8
	var ps []proctest.Proc
	var window proctest.Proc
	window = proctest.Proc{PID: 2001, PPID: 1, UID: uid, Start: 2001, Argv: []string{"foot"}, Cwd: "/"}
	for pid := 2; pid < 2001; pid++ {
		p := proctest.Proc{PID: pid, PPID: 1, UID: uid, Start: uint64(pid), Argv: []string{"sleep", "600"}, Cwd: "/",
			FDs: []string{"/dev/null", "/dev/null", "/dev/null"}}
		if pid%20 == 0 {
			k := pid / 20
			p.Argv = []string{"claude"}
			tty := "/dev/pts/" + strconv.Itoa(k)
			switch kind {
			case "shell":
				p.PPID, p.TTY, p.FDs = pid-1, pts|uint32(k), []string{tty, tty, tty}
				ps[len(ps)-1] = proctest.Proc{PID: pid - 1, PPID: 1, UID: uid, Start: uint64(pid - 1), Argv: []string{"-bash"}, Cwd: "/",
					TTY: pts | uint32(k), FDs: []string{tty, tty, tty}}
			case "window":
				p.TTY, p.FDs = pts|uint32(k), []string{tty, tty, tty}
				window.FDs = append(window.FDs, "/dev/ptmx")
				window.FDInfo = append(window.FDInfo, "tty-index:\t"+strconv.Itoa(k)+"\n")
			}
		}
		ps = append(ps, p)
	}
	ps = append(ps, window)
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

func BenchmarkTableReach(b *testing.B) {
	for _, kind := range []string{"none", "shell", "window"} {
		b.Run(kind, func(b *testing.B) {
			r := benchReachTable(b, kind)
			for b.Loop() {
				h, err := (&tableFile{r.a}).Open()
				if err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
		})
	}
}
