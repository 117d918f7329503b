package harness

import "github.com/9harness/9harness/internal/proc"

// confirmer is a harness some of whose session-shaped processes are agents
// only when its files say so (a Claude background worker, once a job
// claimed it): Scan reads argv alone, so the listing asks Confirm, with
// the harness's Env, of each process Scan found.
type confirmer interface {
	Confirm(env Env, p proc.Proc) bool
}

// Confirmed keeps the processes of found that their harness confirms;
// envOf gives each harness's Env. It filters in place.
func Confirmed(found []Found, envOf func(harness string) Env) []Found {
	out := found[:0]
	for _, f := range found {
		if c, ok := ByName(f.Harness).(confirmer); ok && !c.Confirm(envOf(f.Harness), f.Proc) {
			continue
		}
		out = append(out, f)
	}
	clear(found[len(out):])
	return out
}
