package notify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
)

// A transition is one change of one agent that notify delivers: it
// started waiting, went idle after a turn, or exited. Its id is made of
// the host, harness, pid, start time, state and since, so the same wait
// seen again (after a restart of the daemon or of notify, or a
// reconnection) has the same id and is not delivered again.
type transition struct {
	ID      string `json:"id"`
	Host    string `json:"host"` // the fleet's name: - for this machine
	Shown   string `json:"shown"`
	Harness string `json:"harness"`
	PID     int    `json:"pid"`
	Started int64  `json:"started"`
	State   string `json:"state"` // waiting, idle or exit
	Since   string `json:"since"`
	Waiting string `json:"waiting,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Title   string `json:"title,omitempty"`
	Worked  int64  `json:"worked,omitempty"` // idle: seconds the turn took
}

func transitionID(host, harness string, pid int, started int64, state, since string) string {
	h := sha256.New()
	for _, f := range []string{host, harness, strconv.Itoa(pid), strconv.FormatInt(started, 10), state, since} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// seenAgent is what the state file keeps of a live agent: enough to tell
// its next transition, and to say what exited.
type seenAgent struct {
	Harness   string `json:"harness"`
	PID       int    `json:"pid"`
	Started   int64  `json:"started"`
	State     string `json:"state,omitempty"`
	Since     string `json:"since,omitempty"`      // the daemon's, or when notify first saw the state
	TurnStart string `json:"turn_start,omitempty"` // when its present turn began
	Waiting   string `json:"waiting,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Title     string `json:"title,omitempty"`
}

// outRecord is a transition and its deliveries: Pending names the targets
// it has still to reach; Done those it reached, with when.
type outRecord struct {
	T       transition       `json:"t"`
	Created int64            `json:"created"`
	Pending []string         `json:"pending,omitempty"`
	Done    map[string]int64 `json:"done,omitempty"`
}

// pushState is the state file: each host's agents as last read, and the
// transitions with their deliveries.
type pushState struct {
	Version int                    `json:"version"`
	Hosts   map[string][]seenAgent `json:"hosts"`
	Records map[string]*outRecord  `json:"records"`
}

// Bounds of the state file: a delivered transition is forgotten after a
// day, or once its agent is gone; one that could not be delivered is
// given up after giveUpAfter; never more than maxRecords are kept (the
// oldest go first).
const (
	recordTTL   = 24 * time.Hour
	giveUpAfter = time.Hour
	maxRecords  = 4096
)

// pushStore is the state file and its lock.
type pushStore struct {
	mu    sync.Mutex
	path  string
	st    pushState
	saved []byte // what the file holds: an unchanged state is not written again
}

// pushStatePath is $XDG_STATE_HOME/9harness/notify.state, or under
// ~/.local/state.
func pushStatePath() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "9harness", "notify.state")
}

// lockPushState makes this notify the only one using the state file: two
// would each deliver every transition. The lock is the kernel's, on a
// file beside it, and ends with the process.
func lockPushState(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another 9harness notify uses %s (systemctl --user stop 9harness-notify.service, if it is the unit's)", path)
		}
		return nil, err
	}
	return f, nil
}

// openPushStore reads the state file, or starts an empty one where there
// is none. A file that is not this format is an error, not overwritten.
func openPushStore(path string) (*pushStore, error) {
	s := &pushStore{path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &s.st); err != nil || s.st.Version != 1 {
			return nil, fmt.Errorf("%s is not notify's state file (move it away to start afresh)", path)
		}
	}
	s.st.Version = 1
	if s.st.Hosts == nil {
		s.st.Hosts = map[string][]seenAgent{}
	}
	if s.st.Records == nil {
		s.st.Records = map[string]*outRecord{}
	}
	return s, nil
}

// save writes the state file whole: a new file, synced, renamed over the
// old, so that a crash leaves the one or the other.
func (s *pushStore) save() error {
	b, err := json.Marshal(&s.st)
	if err != nil {
		return err
	}
	if bytes.Equal(b, s.saved) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	s.saved = b
	return nil
}

// observe takes a host's fresh table: it returns the transitions it
// shows against the agents kept from the last read (or from before a
// restart), keeps the new ones as pending for targets, forgets the
// records of agents that are gone, and saves; all under the lock, so the
// agents kept and the records queued never disagree in the file.
func (s *pushStore) observe(host, shown string, agents []client.Agent, cfg *pushConfig, targets []string, now time.Time) ([]transition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, known := s.st.Hosts[host]
	byKey := map[cli.AgentKey]seenAgent{}
	for _, p := range prev {
		byKey[cli.AgentKey{Harness: p.Harness, PID: p.PID, Started: p.Started}] = p
	}
	stamp := now.UTC().Format(time.RFC3339)
	var out []transition
	emit := func(t transition) {
		t.Host, t.Shown = host, shown
		t.ID = transitionID(host, t.Harness, t.PID, t.Started, t.State, t.Since)
		if !slices.Contains(cfg.on, t.State) {
			return
		}
		if _, dup := s.st.Records[t.ID]; dup {
			return
		}
		s.st.Records[t.ID] = &outRecord{T: t, Created: now.Unix(), Pending: slices.Clone(targets)}
		out = append(out, t)
	}
	var next []seenAgent
	// live is every agent of the table, whatever the harness setting: one
	// that a changed config no longer follows has not exited.
	live := map[cli.AgentKey]bool{}
	for _, a := range agents {
		live[cli.KeyOf(a)] = true
	}
	for _, a := range agents {
		if len(cfg.harnesses) > 0 && !slices.Contains(cfg.harnesses, a.Harness) {
			continue
		}
		k := cli.KeyOf(a)
		p, had := byKey[k]
		n := keep(a, p, had, stamp)
		if t, ok := change(a, n, p, had, cfg.idleAfter); ok {
			emit(t)
		}
		next = append(next, n)
	}
	if known {
		for _, p := range prev {
			if !live[cli.AgentKey{Harness: p.Harness, PID: p.PID, Started: p.Started}] {
				emit(transition{Harness: p.Harness, PID: p.PID, Started: p.Started, State: "exit", Since: stamp, Cwd: p.Cwd, Title: p.Title})
			}
		}
	}
	s.st.Hosts[host] = next
	s.forgetGone(host, live)
	s.bound(now)
	return out, s.save()
}

// keep is what the state file keeps of agent a, seen before as p if had:
// since when it is in its state, and when its present turn began.
func keep(a client.Agent, p seenAgent, had bool, stamp string) seenAgent {
	n := seenAgent{Harness: a.Harness, PID: a.PID, Started: a.Started, State: a.State, Since: a.Since, Waiting: a.Waiting, Cwd: a.Cwd, Title: a.Title}
	if n.Since == "" {
		// The harness does not say: the state began when first seen,
		// and a wait for something else is another wait (as ps
		// --notify counts them).
		n.Since = stamp
		if had && p.State == a.State && (a.State != "waiting" || p.Waiting == a.Waiting) {
			n.Since = p.Since
		}
	}
	switch {
	case a.State == "idle" || a.State == "":
	case had && p.TurnStart != "" && p.State != "idle":
		n.TurnStart = p.TurnStart
	case had:
		n.TurnStart = n.Since
	default:
		// First seen mid-turn: the turn is at least this old.
		n.TurnStart = n.Since
	}
	return n
}

// change is the transition agent a made since it was p (if had), now
// kept as n: it started waiting, or went idle after a turn of at least
// idleAfter; false for none.
func change(a client.Agent, n, p seenAgent, had bool, idleAfter time.Duration) (transition, bool) {
	t := transition{Harness: a.Harness, PID: a.PID, Started: a.Started, State: a.State, Since: n.Since, Waiting: a.Waiting, Cwd: a.Cwd, Title: a.Title}
	switch a.State {
	case "waiting":
		if !had || p.State != "waiting" || p.Since != n.Since {
			return t, true
		}
	case "idle":
		if had && p.State != "idle" && p.TurnStart != "" {
			began, err1 := time.Parse(time.RFC3339, p.TurnStart)
			ended, err2 := time.Parse(time.RFC3339, n.Since)
			if err1 == nil && err2 == nil && ended.Sub(began) >= idleAfter {
				t.Worked = int64(ended.Sub(began) / time.Second)
				return t, true
			}
		}
	}
	return transition{}, false
}

// forgetGone forgets host's records that are delivered and can no longer
// recur: their agent is not live (an exit is delivered once).
func (s *pushStore) forgetGone(host string, live map[cli.AgentKey]bool) {
	for id, r := range s.st.Records {
		if r.T.Host != host || len(r.Pending) > 0 {
			continue
		}
		if !live[cli.AgentKey{Harness: r.T.Harness, PID: r.T.PID, Started: r.T.Started}] {
			delete(s.st.Records, id)
		}
	}
}

// bound drops what is too old, and the oldest beyond maxRecords.
func (s *pushStore) bound(now time.Time) {
	for id, r := range s.st.Records {
		if now.Sub(time.Unix(r.Created, 0)) > recordTTL {
			delete(s.st.Records, id)
		}
	}
	if len(s.st.Records) <= maxRecords {
		return
	}
	ids := make([]string, 0, len(s.st.Records))
	for id := range s.st.Records {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return int(s.st.Records[a].Created - s.st.Records[b].Created) })
	for _, id := range ids[:len(ids)-maxRecords] {
		delete(s.st.Records, id)
	}
}

// next returns the oldest transition still pending for target.
func (s *pushStore) next(target string) (transition, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *outRecord
	for _, r := range s.st.Records {
		if slices.Contains(r.Pending, target) && (best == nil || r.Created < best.Created || r.Created == best.Created && r.T.ID < best.T.ID) {
			best = r
		}
	}
	if best == nil {
		return transition{}, time.Time{}, false
	}
	return best.T, time.Unix(best.Created, 0), true
}

// settle records that target reached the transition (or gave it up), and
// saves.
func (s *pushStore) settle(id, target string, delivered bool, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.Records[id]
	if r == nil {
		return nil
	}
	r.Pending = slices.DeleteFunc(r.Pending, func(t string) bool { return t == target })
	if delivered {
		if r.Done == nil {
			r.Done = map[string]int64{}
		}
		r.Done[target] = now.Unix()
	}
	return s.save()
}

// forgetTargets drops from every record the pending deliveries to targets
// the config no longer names, and saves.
func (s *pushStore) forgetTargets(targets []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.st.Records {
		r.Pending = slices.DeleteFunc(r.Pending, func(t string) bool { return !slices.Contains(targets, t) })
	}
	return s.save()
}
