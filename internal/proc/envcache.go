package proc

import (
	"strings"
	"sync"
)

// envCache keeps the Wanted variables of each process whose environment
// was read, keyed by what identifies the process's image: pid, start
// time, and the command line the caller's scan read. A process's
// environment is fixed at exec; a pid whose start time changed is another
// process, and an exec (same pid, same start time) comes with a new
// command line, so an entry that matches all three is the process's
// environment as a read now would give it. Only the Wanted variables are
// kept (never the rest of an environment), the cache is bounded, and the
// entries of processes no longer listed are dropped (RetainEnv).
type envCache struct {
	mu sync.Mutex
	m  map[int]envEntry
}

type envEntry struct {
	start uint64
	argv  string // the command line, NUL-joined
	vars  []string
}

// envCacheMax bounds the cache: far more agents than one user runs.
const envCacheMax = 4096

func argvKey(argv []string) string { return strings.Join(argv, "\x00") }

// EnvironOf is Environ for p, a process as a scan just read it (pid,
// start time and argv set), restricted to the Wanted variables, from the
// table's cache when p's image is the one last read. A p without argv is
// read, never cached: without it an exec could not be told apart.
func (t *Table) EnvironOf(p Proc) ([]string, error) {
	if len(p.Argv) == 0 {
		env, err := t.Environ(p.PID)
		return OnlyWanted(env), err
	}
	key := argvKey(p.Argv)
	t.envs.mu.Lock()
	e, ok := t.envs.m[p.PID]
	t.envs.mu.Unlock()
	if ok && e.start == p.Start && e.argv == key {
		return e.vars, nil
	}
	env, err := t.Environ(p.PID)
	if err != nil {
		return nil, err
	}
	vars := OnlyWanted(env)
	// The read is this process's only if the pid still names it: a
	// process that exited and whose pid was taken between the scan and the
	// read gave another's environment, which is neither kept nor answered.
	if !t.Alive(p.PID, p.Start) {
		return nil, ErrGone
	}
	t.envs.mu.Lock()
	if t.envs.m == nil {
		t.envs.m = map[int]envEntry{}
	}
	if len(t.envs.m) >= envCacheMax {
		clear(t.envs.m)
	}
	t.envs.m[p.PID] = envEntry{start: p.Start, argv: key, vars: vars}
	t.envs.mu.Unlock()
	return vars, nil
}

// GetenvOf is Getenv for p, through EnvironOf's cache.
func (t *Table) GetenvOf(p Proc, name string) (string, bool) {
	if !IsWanted(name) {
		return "", false
	}
	env, err := t.EnvironOf(p)
	if err != nil {
		return "", false
	}
	return lookupEnv(env, name)
}

// RetainEnv drops the cached environments of every process not in live
// (a scan's result): an exited agent's entry goes with the next scan.
func (t *Table) RetainEnv(live []Proc) {
	keep := make(map[int]uint64, len(live))
	for _, p := range live {
		keep[p.PID] = p.Start
	}
	t.envs.mu.Lock()
	defer t.envs.mu.Unlock()
	for pid, e := range t.envs.m {
		if st, ok := keep[pid]; !ok || st != e.start {
			delete(t.envs.m, pid)
		}
	}
}
