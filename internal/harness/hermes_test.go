package harness

import (
	"fmt"
	"testing"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/proc/proctest"
)

const (
	hmPID  = 155574
	hmTick = 12000 // 120 s after boot
)

// hmLease is an active_sessions.json entry; start is seconds after boot.
func hmLease(sid string, pid int, start, updated float64) string {
	return fmt.Sprintf(`{"lease_id":"3f2a9c0e5b7d4e1f8a6b2c4d0e9f1a3b","metadata":{"live_session_id":"c0ffee"},"pid":%d,"process_start_time":%.2f,"session_id":%q,"started_at":%.1f,"surface":"cli","updated_at":%.1f}`,
		pid, float64(proctest.Boot)+start, sid, float64(proctest.Boot)+start+5, float64(proctest.Boot)+updated)
}

func hmProc(f *fx) (proc.Proc, Agent) {
	p := f.add(proctest.Proc{PID: hmPID, PPID: 100, Start: hmTick, Argv: []string{f.home + "/.hermes/venv/bin/python3", f.home + "/.local/bin/hermes", "--tui"}, Env: f.stdEnv(), Cwd: f.cwd()})
	return p, Agent{Harness: "hermes", PID: hmPID, PPID: 100, Start: hmTick, Cwd: f.cwd(), Via: "none", Zmx: "work", TmuxSocket: "/tmp/tmux-1000/default"}
}

func TestResolveHermes(t *testing.T) {
	reg := func(f *fx, leases ...string) {
		s := `{"entries":[`
		for i, l := range leases {
			if i > 0 {
				s += ","
			}
			s += l
		}
		f.write(".hermes/runtime/active_sessions.json", s+"]}", at(900))
	}
	runResolve(t, []resolveCase{
		{"hermes/registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			reg(f, hmLease("20260920_100000_a1b2c3", hmPID, 120.51, 500), hmLease("20260920_090000_ffffff", 999, 50, 400))
			p, want := hmProc(f)
			want.Session, want.Via = "20260920_100000_a1b2c3", "registry"
			return hermes{}, f.env(".hermes"), p, want
		}},
		{"hermes/two-leases-one-pid", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			reg(f, hmLease("20260920_100000_aaaaaa", hmPID, 120.51, 600), hmLease("20260920_100500_bbbbbb", hmPID, 119.2, 700), hmLease("20260920_100100_cccccc", hmPID, 120, 650))
			p, want := hmProc(f)
			want.Session, want.Via = "20260920_100500_bbbbbb", "registry (3 leases on this pid; the most recently updated)"
			return hermes{}, f.env(".hermes"), p, want
		}},
		{"hermes/reused-pid", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			reg(f, hmLease("20260920_100000_a1b2c3", hmPID, 20, 500))
			p, want := hmProc(f)
			want.Via = "none (the leases for this pid are another process's: process_start_time differs)"
			return hermes{}, f.env(".hermes"), p, want
		}},
		{"hermes/no-lease", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			reg(f, hmLease("20260920_090000_ffffff", 999, 50, 400))
			p, want := hmProc(f)
			want.Via = "none (no lease for this pid)"
			return hermes{}, f.env(".hermes"), p, want
		}},
		{"hermes/no-registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			p, want := hmProc(f)
			want.Via = "none (no lease registry)"
			return hermes{}, f.env(".hermes"), p, want
		}},
		{"hermes/torn-registry", func(f *fx) (Harness, Env, proc.Proc, Agent) {
			f.write(".hermes/runtime/active_sessions.json", `{"entries":[{"pid":155574,"process_`, at(900))
			p, want := hmProc(f)
			want.Via = "none (no lease registry)"
			return hermes{}, f.env(".hermes"), p, want
		}},
	})
}
