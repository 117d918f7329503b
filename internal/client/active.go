package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// ActiveRoot is where the daemon lists the live agents:
// /active/<harness>/<pid>/ with one small file per fact.
const ActiveRoot = "/active"

// Agent is one live agent as its directory /active/<harness>/<pid>/ shows
// it, read file by file. A fact the tree does not have (its file is
// absent) is the zero value here and is omitted from JSON; Zmx and Tmux are
// always present, empty outside a session.
type Agent struct {
	Harness    string   `json:"harness"`
	PID        int      `json:"pid"`
	PPID       int      `json:"ppid,omitempty"`
	Started    int64    `json:"started,omitempty"` // unix seconds
	Cwd        string   `json:"cwd,omitempty"`
	Name       string   `json:"name,omitempty"`
	Title      string   `json:"title,omitempty"`
	Session    string   `json:"session,omitempty"`
	Model      string   `json:"model,omitempty"`
	Via        string   `json:"via,omitempty"`
	Status     string   `json:"status,omitempty"`
	State      string   `json:"state,omitempty"`     // working, waiting or idle
	Waiting    string   `json:"waiting,omitempty"`   // what a waiting agent waits for
	Since      string   `json:"since,omitempty"`     // RFC 3339: when it entered State
	StateVia   string   `json:"state.via,omitempty"` // how State was found, or why not
	Zmx        string   `json:"zmx"`
	Tmux       string   `json:"tmux"`
	Transcript string   `json:"transcript,omitempty"` // the tree path of the live transcript
	Agents     []string `json:"agents,omitempty"`     // sub-agents: names under agents/
	Tokens     Tokens   `json:"tokens,omitempty"`     // token counts by name, where the harness records them
	Limits     Limits   `json:"limits,omitempty"`     // subscription windows by name, where the harness records them
	Reach      string   `json:"reach,omitempty"`      // zmx, tmux, tty or detached: who can answer it
	Attach     string   `json:"attach,omitempty"`     // the command that reaches a session its harness hosts ("claude attach ID")
	// Pending names the facts the daemon had not derived yet when it made
	// the table (the first read of many agents): such a fact is absent
	// (title, model), or holds only what was derived (tokens: the
	// context, without the sums). The agent's own files are complete.
	Pending []string `json:"pending,omitempty"`
}

// MarshalJSON writes the agent as ps --json shows it: its fields, and
// beside state.via and started, for scripts, state_via (a key jq's .a.b
// and Go templates can name) and started_at (RFC 3339 UTC, like since).
// The older two stay for one release (CHANGELOG).
func (a Agent) MarshalJSON() ([]byte, error) {
	type plain Agent
	started := ""
	if a.Started > 0 {
		started = time.Unix(a.Started, 0).UTC().Format(time.RFC3339)
	}
	return json.Marshal(struct {
		plain
		StateVia  string `json:"state_via,omitempty"`
		StartedAt string `json:"started_at,omitempty"`
	}{plain(a), a.StateVia, started})
}

// Tokens are an agent's token counts by name (context, input, output,
// cache_read, cache_write), as its tokens file gives them: one "NAME N"
// line each, only the names the harness records.
type Tokens map[string]int64

// ParseTokens reads the tokens file's text; a malformed line is skipped.
func ParseTokens(s string) Tokens {
	var t Tokens
	for _, ln := range strings.Split(s, "\n") {
		name, num, ok := strings.Cut(strings.TrimSpace(ln), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || name == "" {
			continue
		}
		if t == nil {
			t = Tokens{}
		}
		t[name] = n
	}
	return t
}

// UnmarshalJSON takes the object ps --json writes, or the file's text,
// which is how /active/table carries it.
func (t *Tokens) UnmarshalJSON(b []byte) error { return unmarshalFact(b, t, ParseTokens) }

// unmarshalFact decodes b into *dst: a JSON string is the fact's file
// text, read by parse; anything else the object it stands for.
func unmarshalFact[T ~map[string]V, V any](b []byte, dst *T, parse func(string) T) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*dst = parse(s)
		return nil
	}
	var m map[string]V // not T, whose UnmarshalJSON this is
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*dst = m
	return nil
}

// Limit is one subscription window: the share used (0–100), the window's
// length in minutes and when it resets (RFC 3339 UTC), each as the limits
// file gives it (0 and "" where the harness did not record them).
type Limit struct {
	UsedPercent   float64 `json:"used_percent"`
	WindowMinutes int64   `json:"window_minutes,omitempty"`
	ResetsAt      string  `json:"resets_at,omitempty"`
}

// Limits are an agent's windows by name (Codex: primary, secondary), as
// its limits file gives them: one "NAME used_percent window_minutes
// resets_at" line each, "-" for a field not recorded.
type Limits map[string]Limit

// ParseLimits reads the limits file's text; a malformed line is skipped.
func ParseLimits(s string) Limits {
	var l Limits
	for _, ln := range strings.Split(s, "\n") {
		f := strings.Fields(ln)
		if len(f) != 4 {
			continue
		}
		used, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		w := Limit{UsedPercent: used}
		if f[2] != "-" {
			if w.WindowMinutes, err = strconv.ParseInt(f[2], 10, 64); err != nil {
				continue
			}
		}
		if f[3] != "-" {
			if _, err := time.Parse(time.RFC3339, f[3]); err != nil {
				continue
			}
			w.ResetsAt = f[3]
		}
		if l == nil {
			l = Limits{}
		}
		l[f[0]] = w
	}
	return l
}

// UnmarshalJSON takes the object ps --json writes, or the file's text,
// which is how /active/table carries it.
func (l *Limits) UnmarshalJSON(b []byte) error { return unmarshalFact(b, l, ParseLimits) }

// Tightest is the window with the largest share used (ties: the
// shorter window), and false when there is none.
func (l Limits) Tightest() (string, Limit, bool) {
	var name string
	var best Limit
	found := false
	for n, w := range l {
		better := !found || w.UsedPercent > best.UsedPercent ||
			w.UsedPercent == best.UsedPercent && (w.WindowMinutes < best.WindowMinutes || w.WindowMinutes == best.WindowMinutes && n < name)
		if better {
			name, best, found = n, w, true
		}
	}
	return name, best, found
}

// Dir is the agent's directory in the tree.
func (a Agent) Dir() string { return AgentDir(a.Harness, a.PID) }

// AgentDir is /active/<harness>/<pid>.
func AgentDir(harness string, pid int) string {
	return ActiveRoot + "/" + harness + "/" + strconv.Itoa(pid)
}

// ErrGone is an agent that exited (or whose pid was reused) while it was
// being read: the tree is live.
var ErrGone = errors.New("the agent is gone")

// UnknownHarnessError is a harness the daemon's /active does not have.
type UnknownHarnessError struct {
	Name  string
	Known []string
}

func (e *UnknownHarnessError) Error() string {
	return fmt.Sprintf("no harness %q under %s (there: %s)", e.Name, ActiveRoot, strings.Join(e.Known, ", "))
}

// TablePath is the daemon's whole table of agents as JSON Lines, one
// object per agent with the keys of Agent's JSON (a daemon older than the
// file has no such file).
const TablePath = ActiveRoot + "/table"

// Harnesses lists the harness directories under /active, sorted.
func (c *Client) Harnesses() ([]string, error) {
	ents, err := c.ReadDir(ActiveRoot)
	if err != nil {
		if IsErrno(err, syscall.ENOENT) {
			return nil, fmt.Errorf("the daemon has no %s (is it older than this client?)", ActiveRoot)
		}
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.QID.IsDir() {
			out = append(out, e.Name) // not a file beside them
		}
	}
	sort.Strings(out)
	return out, nil
}

// readers bounds the agents read at once over one connection.
const readers = 8

// Agents reads every live agent of the given harnesses (all of them when
// none is given), sorted by harness, then pid. An agent that vanishes
// while it is read is left out; a harness the tree does not have is an
// *UnknownHarnessError. The result is never nil.
//
// It reads /active/table (one walk, one open, a few reads), or, from a
// daemon older than that file, every agent's directory (AgentsWalk).
func (c *Client) Agents(harnesses ...string) ([]Agent, error) {
	all, err := c.Table()
	if IsErrno(err, syscall.ENOENT) {
		return c.AgentsWalk(harnesses...)
	}
	if err != nil {
		return nil, err
	}
	if len(harnesses) == 0 {
		return all, nil
	}
	want, err := c.wantHarnesses(harnesses)
	if err != nil {
		return nil, err
	}
	out := make([]Agent, 0, len(all))
	for _, a := range all {
		if slices.Contains(want, a.Harness) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Table reads /active/table: every live agent, sorted by harness, then
// pid. An error that is the errno ENOENT is a daemon without the file.
func (c *Client) Table() ([]Agent, error) {
	// One Tread for a table of up to a few thousand agents: its buffer is
	// as large as a message carries, of which only what the table fills
	// is ever touched.
	chunks, err := c.readChunks(TablePath, 1<<20)
	if err != nil {
		return nil, err
	}
	// One string of the whole table, whose slices the agents' strings are
	// (parseTable): the only chunk itself, never written again, or the
	// chunks copied once into it.
	var s string
	if len(chunks) == 1 {
		s = unsafe.String(unsafe.SliceData(chunks[0]), len(chunks[0]))
	} else {
		var b strings.Builder
		b.Grow(chunksLen(chunks))
		for _, ch := range chunks {
			b.Write(ch)
		}
		s = b.String()
	}
	out, err := parseTable(s)
	if err != nil {
		return nil, err
	}
	sortAgents(out)
	return out, nil
}

// AgentsWalk is Agents by reading every agent's directory, file by file:
// what a daemon without /active/table offers.
func (c *Client) AgentsWalk(harnesses ...string) ([]Agent, error) {
	want, err := c.wantHarnesses(harnesses)
	if err != nil {
		return nil, err
	}
	var keys []agentRef
	for _, h := range want {
		ents, err := c.ReadDir(ActiveRoot + "/" + h)
		if err != nil {
			if IsErrno(err, syscall.ENOENT) {
				continue
			}
			return nil, err
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name)
			if err != nil || pid <= 0 {
				continue
			}
			keys = append(keys, agentRef{h, pid})
		}
	}
	out, err := c.agentsOf(keys)
	if err != nil {
		return nil, err
	}
	sortAgents(out)
	return out, nil
}

// wantHarnesses is the harnesses asked for, each once and sorted, or
// every one under /active when none is; one that is not there is an
// *UnknownHarnessError.
func (c *Client) wantHarnesses(asked []string) ([]string, error) {
	known, err := c.Harnesses()
	if err != nil {
		return nil, err
	}
	if len(asked) == 0 {
		return known, nil
	}
	have := map[string]bool{}
	for _, h := range known {
		have[h] = true
	}
	seen := map[string]bool{}
	var want []string
	for _, h := range asked {
		if !have[h] {
			return nil, &UnknownHarnessError{Name: h, Known: known}
		}
		if !seen[h] {
			seen[h] = true
			want = append(want, h)
		}
	}
	sort.Strings(want)
	return want, nil
}

// agentRef names one agent's directory.
type agentRef struct {
	h   string
	pid int
}

// agentsOf reads the agents of keys, up to readers at once, in the order
// of keys; one that is gone is left out.
func (c *Client) agentsOf(keys []agentRef) ([]Agent, error) {
	got := make([]*Agent, len(keys))
	errc := make([]error, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, readers)
	for i, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a, err := c.Agent(k.h, k.pid)
			if err == nil {
				got[i] = &a
			} else if !errors.Is(err, ErrGone) {
				errc[i] = err
			}
		}()
	}
	wg.Wait()
	out := make([]Agent, 0, len(keys))
	for i := range keys {
		if errc[i] != nil {
			return nil, errc[i]
		}
		if got[i] != nil {
			out = append(out, *got[i])
		}
	}
	return out, nil
}

// sortAgents sorts agents by harness, then pid.
func sortAgents(out []Agent) {
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Harness != out[j].Harness {
			return out[i].Harness < out[j].Harness
		}
		return out[i].PID < out[j].PID
	})
}

// Agent reads one agent's directory: the files it lists, each read once.
// It returns ErrGone when the agent is not (or no longer) there. A fact
// the daemon answers with an errno is left unknown; a failed transport is
// an error.
func (c *Client) Agent(harness string, pid int) (Agent, error) {
	dir := AgentDir(harness, pid)
	a := Agent{Harness: harness, PID: pid}
	nums := map[string]*string{"pid": new(string), "ppid": new(string), "started": new(string), "tokens": new(string), "limits": new(string)}
	ents, err := c.ReadDir(dir)
	if err != nil {
		if IsErrno(err, syscall.ENOENT) {
			return a, ErrGone
		}
		return a, err
	}
	for _, e := range ents {
		switch e.Name {
		case "transcript":
			a.Transcript = dir + "/transcript"
			continue
		case "agents":
			subs, err := c.ReadDir(dir + "/agents")
			if err != nil {
				if IsWireErrno(err) {
					continue
				}
				return a, err
			}
			for _, s := range subs {
				a.Agents = append(a.Agents, s.Name)
			}
			sort.Strings(a.Agents)
			continue
		}
		dst := a.field(e.Name, nums)
		if dst == nil {
			continue // a fact this client does not know yet
		}
		b, err := c.ReadFile(dir + "/" + e.Name)
		if err != nil {
			if !IsWireErrno(err) {
				return a, err
			}
			if IsErrno(err, syscall.ENOENT) {
				// The fact vanished, or the whole agent did.
				if _, _, serr := c.Stat(dir); IsErrno(serr, syscall.ENOENT) {
					return a, ErrGone
				}
			}
			continue
		}
		*dst = strings.TrimSuffix(string(b), "\n")
	}
	if v, err := strconv.Atoi(*nums["pid"]); err == nil && v != pid {
		return a, ErrGone // another process behind the name
	}
	if v, err := strconv.Atoi(*nums["ppid"]); err == nil {
		a.PPID = v
	}
	if v, err := strconv.ParseInt(*nums["started"], 10, 64); err == nil {
		a.Started = v
	}
	a.Tokens = ParseTokens(*nums["tokens"])
	a.Limits = ParseLimits(*nums["limits"])
	return a, nil
}

// field is where the text of the fact file name goes; nil for a file
// this client does not know.
func (a *Agent) field(name string, nums map[string]*string) *string {
	switch name {
	case "cwd":
		return &a.Cwd
	case "name":
		return &a.Name
	case "title":
		return &a.Title
	case "session":
		return &a.Session
	case "model":
		return &a.Model
	case "via":
		return &a.Via
	case "status":
		return &a.Status
	case "state":
		return &a.State
	case "waiting":
		return &a.Waiting
	case "since":
		return &a.Since
	case "state.via":
		return &a.StateVia
	case "zmx":
		return &a.Zmx
	case "tmux":
		return &a.Tmux
	case "reach":
		return &a.Reach
	case "attach":
		return &a.Attach
	}
	return nums[name]
}
