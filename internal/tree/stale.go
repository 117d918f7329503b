package tree

import (
	"sort"
	"strconv"
	"time"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/harness"
)

// stale is /stale: the records a harness keeps for agents that no longer
// run (Claude's registry record of a dead or reused pid, a background job
// whose state claims a process that is not there), one directory each,
// /stale/<harness>/<id>/, of derived facts:
//
//	claim    what the record claims ("registry: session <id> busy (bg)",
//	         "job <id>: running")
//	pid      the pid it names, where it names one
//	since    the record's own newest time, RFC 3339, where it has one
//	why      why it is stale ("pid 4668 is not running", "pid 4668 is
//	         another process (…)", "no live process has the job's
//	         registry record")
//	session  the session it names, where it names one
//
// Never the record file itself: a record may sit beside secrets (Claude's
// per-session .key files, a job's provider environment). Everything is
// derived afresh at each lookup and listing, and nothing is deleted. A
// grantee sees /stale whole: its facts are session state, none of them
// from an agent's environment.
type stale struct {
	a *active
}

func (s *stale) Attr() (Attr, error) {
	t := s.a.start
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: SynthPath("/stale")}, nil
}

func (s *stale) Lookup(name string) (Node, error) {
	for _, h := range Harnesses {
		if h == name {
			return &staleHarness{a: s.a, h: h}, nil
		}
	}
	return nil, errs.E("stale.Lookup", errs.NotExist, "/stale/"+name, nil)
}

func (s *stale) List() ([]Entry, error) {
	names := append([]string(nil), Harnesses...)
	sort.Strings(names)
	out := make([]Entry, len(names))
	for i, h := range names {
		out[i] = Entry{Name: h, Dir: true, Path: SynthPath("/stale/" + h)}
	}
	return out, nil
}

// staleHarness is /stale/<harness>.
type staleHarness struct {
	a *active
	h string
}

func (d *staleHarness) path() string { return "/stale/" + d.h }

func (d *staleHarness) records() []harness.Stale {
	return harness.StaleRecords(d.h, d.a.cfg.Envs[d.h])
}

func (d *staleHarness) Attr() (Attr, error) {
	t := d.a.start
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: SynthPath(d.path())}, nil
}

func (d *staleHarness) Lookup(name string) (Node, error) {
	for _, r := range d.records() {
		if r.ID == name {
			return &staleRecord{d: d, r: r}, nil
		}
	}
	return nil, errs.E("stale.Lookup", errs.NotExist, d.path()+"/"+name, nil)
}

func (d *staleHarness) List() ([]Entry, error) {
	rs := d.records()
	out := make([]Entry, 0, len(rs))
	for _, r := range rs {
		out = append(out, Entry{Name: r.ID, Dir: true, Path: SynthPath(d.path() + "/" + r.ID)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// staleRecord is /stale/<harness>/<id>: the facts as found by the lookup
// that walked to it (a record is a fixed past claim; a record that has
// gone since is gone at the next lookup).
type staleRecord struct {
	d *staleHarness
	r harness.Stale
}

func (s *staleRecord) path() string { return s.d.path() + "/" + s.r.ID }

// staleFacts are the record's files and values; absent ones are left out.
func (s *staleRecord) facts() map[string]string {
	m := map[string]string{"claim": s.r.Claim, "why": s.r.Why}
	if s.r.PID > 0 {
		m["pid"] = strconv.Itoa(s.r.PID)
	}
	if !s.r.Since.IsZero() {
		m["since"] = s.r.Since.UTC().Format(time.RFC3339)
	}
	if s.r.Session != "" {
		m["session"] = s.r.Session
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

func (s *staleRecord) mtime() time.Time {
	if !s.r.Since.IsZero() {
		return s.r.Since
	}
	return s.d.a.start
}

func (s *staleRecord) Attr() (Attr, error) {
	t := s.mtime()
	return Attr{Dir: true, Mode: 0o555, Nlink: 2, Atime: t, Mtime: t, Ctime: t, Path: SynthPath(s.path())}, nil
}

func (s *staleRecord) Lookup(name string) (Node, error) {
	v, ok := s.facts()[name]
	if !ok {
		return nil, errs.E("stale.Lookup", errs.NotExist, s.path()+"/"+name, nil)
	}
	mt := s.mtime()
	return NewGen(s.path()+"/"+name, func() time.Time { return mt }, func() []byte { return []byte(v + "\n") }), nil
}

func (s *staleRecord) List() ([]Entry, error) {
	var out []Entry
	for name := range s.facts() {
		out = append(out, Entry{Name: name, Path: SynthPath(s.path() + "/" + name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
