package harness

import (
	"bytes"
	"encoding/json"
	"path"
	"regexp"
	"strings"

	"github.com/9harness/9harness/internal/proc"
	"github.com/9harness/9harness/internal/saferoot"
)

// codex is the OpenAI Codex CLI (root ~/.codex, or $CODEX_HOME).
//
// Processes: the standalone install is a native binary, argv[0] basename
// "codex"; the npm install is a node wrapper (node …/bin/codex.js, or
// node …/bin/codex through the npm bin link) that spawns the native binary
// as a child, named "codex" in current layouts and "codex-<target triple>"
// (codex-x86_64-unknown-linux-musl) in mid-2025 ones.
//
// The wrapper decision: the native process is the session, and the node
// wrapper is a Helper. The native process is what holds the rollout open,
// so the fd route reads the listed process's own descriptors; it is the only
// process a standalone install has, so both installs list the same shape;
// and signalling it ends the wrapper too (the wrapper exits with its child),
// while the wrapper merely forwards signals to it. A native codex whose
// parent is itself a native codex is a helper that the session spawned (the
// arg0-dispatched apply-patch/sandbox runners, an exec-server), never a
// second session.
//
// Resolution: the rollout the native process holds open,
// sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl (or .jsonl.zst);
// the session id is the last 36 characters of the name before ".jsonl"
// (the timestamp in front holds dashes too). A rollout is created lazily on
// the first persisted item, so a fresh codex has no fd and stays unresolved.
type codex struct{}

func (codex) Name() string { return "codex" }

var (
	codexFlags = flags{
		value: set("-c", "--config", "-m", "--model", "-p", "--profile", "-s", "--sandbox",
			"-a", "--ask-for-approval", "-C", "--cd", "-i", "--image", "--add-dir", "--enable",
			"--disable", "--local-provider", "--remote", "--color", "-o", "--output-last-message",
			"--output-schema"),
	}
	// Subcommands that are not an agent session (exec and review are: they
	// are agents at work with their own rollout).
	codexHelperWords = set("app-server", "mcp-server", "exec-server", "mcp", "login", "logout",
		"completion", "sandbox", "debug", "apply", "a", "cloud", "cloud-tasks",
		"responses-api-proxy", "stdio-to-uds", "features", "generate-ts", "proto", "p", "help",
		"update", "daemon", "serve", "acp")
	codexArches  = set("x86_64", "aarch64", "arm64", "armv7", "i686", "riscv64", "powerpc64le", "s390x", "loongarch64")
	codexRollout = regexp.MustCompile(`^sessions/\d{4}/\d{2}/\d{2}/rollout-[^/]+\.jsonl(\.zst)?$`)
)

// codexNative reports whether argv[0]'s basename is the native binary:
// "codex", or "codex-<arch>-<vendor>-<os>[-<abi>]".
func codexNative(b string) bool {
	if b == "codex" {
		return true
	}
	triple, ok := strings.CutPrefix(b, "codex-")
	parts := strings.Split(triple, "-")
	return ok && len(parts) >= 3 && codexArches[parts[0]]
}

// codexWrapper reports whether argv is the npm node wrapper, and its args.
func codexWrapper(argv []string) ([]string, bool) {
	if len(argv) < 2 || !isNode(base(argv[0])) {
		return nil, false
	}
	script, rest := interpScript(argv[1:])
	if strings.HasSuffix(script, "/codex.js") || script == "codex.js" ||
		(base(script) == "codex" && strings.Contains(script, "bin/codex")) {
		return rest, true
	}
	return nil, false
}

// Classify implements Harness.
func (codex) Classify(p, parent proc.Proc) Kind {
	if len(p.Argv) == 0 {
		return None
	}
	argv := normArgv(p.Argv)
	if _, ok := codexWrapper(argv); ok {
		return Helper // its native child is the session
	}
	if !codexNative(base(argv[0])) {
		return None
	}
	if len(parent.Argv) > 0 && codexNative(base(normArgv(parent.Argv)[0])) {
		return Helper // spawned by a codex
	}
	args := argv[1:]
	for _, a := range args {
		if strings.HasPrefix(a, "--codex-run-as-") {
			return Helper
		}
	}
	if codexHelperWords[codexFlags.positional(args)] {
		return Helper
	}
	return Session
}

// codexID is the session id in a rollout's name.
func codexID(rel string) string {
	name := strings.TrimSuffix(path.Base(rel), ".zst")
	name, ok := strings.CutSuffix(name, ".jsonl")
	if !ok || len(name) < 36 {
		return ""
	}
	if id := name[len(name)-36:]; isUUID(id) {
		return id
	}
	return ""
}

// codexMeta is what a rollout's first line (session_meta) says of it.
type codexMeta struct {
	parent   string // the parent thread of a sub-agent's rollout
	nickname string
	role     string
}

// codexHead reads a rollout's first line, decompressing a .zst one. A first
// line longer than the probe (base_instructions can be long) comes back cut.
func codexHead(r *saferoot.Root, rel string) []byte {
	var b []byte
	if strings.HasSuffix(rel, ".zst") {
		raw, err := readSmall(r, rel, smallFile)
		if err != nil {
			return nil
		}
		b = unzstd(raw, smallFile)
	} else {
		var err error
		if b, err = readSmall(r, rel, smallFile); err != nil {
			return nil
		}
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return b
}

func codexReadMeta(r *saferoot.Root, rel string) codexMeta {
	var m codexMeta
	ln := codexHead(r, rel)
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			Source        json.RawMessage `json:"source"`
			AgentNickname string          `json:"agent_nickname"`
			AgentRole     string          `json:"agent_role"`
		} `json:"payload"`
	}
	if json.Unmarshal(ln, &l) == nil {
		if l.Type != "session_meta" {
			return m
		}
		var src struct {
			Subagent struct {
				ThreadSpawn struct {
					ParentThreadID string `json:"parent_thread_id"`
					AgentNickname  string `json:"agent_nickname"`
					AgentRole      string `json:"agent_role"`
				} `json:"thread_spawn"`
			} `json:"subagent"`
		}
		json.Unmarshal(l.Payload.Source, &src) // a plain "cli" source leaves it empty
		ts := src.Subagent.ThreadSpawn
		m.parent = ts.ParentThreadID
		m.nickname = pick(ts.AgentNickname, l.Payload.AgentNickname)
		m.role = pick(ts.AgentRole, l.Payload.AgentRole)
		return m
	}
	// A cut line: serde writes the source before the instructions, so the
	// thread_spawn fields are still in the probe.
	m.parent = stringField(ln, "parent_thread_id")
	m.nickname = stringField(ln, "agent_nickname")
	m.role = stringField(ln, "agent_role")
	return m
}

// stringField finds "key":"value" in a cut JSON line; "" if absent or if
// the value holds an escape (then it is not worth guessing).
func stringField(ln []byte, key string) string {
	k := []byte(`"` + key + `":"`)
	i := bytes.Index(ln, k)
	if i < 0 {
		return ""
	}
	rest := ln[i+len(k):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return ""
	}
	return string(rest[:j])
}

// Resolve implements Harness.
func (codex) Resolve(env Env, p proc.Proc) Agent {
	a, _ := start("codex", env, p)
	if env.Root == nil {
		return a
	}
	var main, subs []byMtime
	metas := map[string]codexMeta{}
	for _, rel := range held(env, p.PID, "sessions/") {
		if !codexRollout.MatchString(rel) || codexID(rel) == "" {
			continue
		}
		info, err := env.Root.Stat(rel)
		if err != nil || info.Dir {
			continue
		}
		m := codexReadMeta(env.Root, rel)
		metas[rel] = m
		if m.parent != "" {
			subs = append(subs, byMtime{rel, info.Mtime})
		} else {
			main = append(main, byMtime{rel, info.Mtime})
		}
	}
	if len(main) == 0 {
		main = subs // only sub-agent rollouts held: the newest stands for the session
	}
	if len(main) == 0 {
		a.Via = "none (no rollout open yet)"
		return a
	}
	newestFirst(main)
	rel := main[0].rel
	a.Session, a.Transcript, a.Via = codexID(rel), rel, "fd"
	a.Model, a.Title = codexFacts(env.Root, rel)
	if t := codexIndexTitle(env.Root, a.Session); t != "" {
		a.Title = t
	}
	a.Agents = codexSubs(env.Root, rel, a.Session, subs, metas)
	return a
}

// codexFacts reads a rollout's model (the last turn_context's) and the last
// thread name it recorded (event_msg thread_name_updated).
func codexFacts(r *saferoot.Root, rel string) (model, title string) {
	var head, tail [][]byte
	if strings.HasSuffix(rel, ".zst") {
		head, tail = zwindows(r, rel, zHeadWindow, zTailWindow)
	} else {
		head, tail = windows(r, rel, headWindow, tailWindow)
	}
	for _, ln := range append(head, tail...) {
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				Type       string `json:"type"`
				Model      string `json:"model"`
				ThreadName string `json:"thread_name"`
				Name       string `json:"name"`
			} `json:"payload"`
		}
		if json.Unmarshal(ln, &l) != nil {
			continue
		}
		switch {
		case l.Type == "turn_context":
			model = pick(model, l.Payload.Model)
		case l.Type == "event_msg" && l.Payload.Type == "thread_name_updated":
			title = pick(title, pick(l.Payload.Name, l.Payload.ThreadName))
		}
	}
	return model, cleanTitle(title)
}

// codexIndexTitle is the newest thread_name session_index.jsonl holds for
// id. The index is append-only, so the newest is the last line naming id;
// only its tail is read.
func codexIndexTitle(r *saferoot.Root, id string) string {
	head, tail := windows(r, "session_index.jsonl", 0, indexTail)
	title := ""
	for _, ln := range append(head, tail...) {
		if !bytes.Contains(ln, []byte(id)) {
			continue
		}
		var e struct {
			ID         string `json:"id"`
			ThreadName string `json:"thread_name"`
		}
		if json.Unmarshal(ln, &e) == nil && e.ID == id {
			title = pick(title, e.ThreadName)
		}
	}
	return cleanTitle(title)
}

// codexSubs lists the sub-agent threads of session id: the rollouts whose
// session_meta names id as parent_thread_id. They are the sub-agent
// rollouts the process holds, and those begun later in the same day dir
// (the names sort by their start time, so only later names are read).
func codexSubs(r *saferoot.Root, mainRel, id string, held []byMtime, metas map[string]codexMeta) []Sub {
	rels := map[string]bool{}
	for _, h := range held {
		if metas[h.rel].parent == id {
			rels[h.rel] = true
		}
	}
	dir := path.Dir(mainRel)
	if ents, err := r.ReadDir(dir); err == nil {
		n := 0
		for _, e := range ents {
			rel := dir + "/" + e.Name
			if e.Dir || rel <= mainRel || rels[rel] || !codexRollout.MatchString(rel) || codexID(rel) == "" {
				continue
			}
			if n++; n > 128 {
				break
			}
			m, ok := metas[rel]
			if !ok {
				m = codexReadMeta(r, rel)
				metas[rel] = m
			}
			if m.parent == id {
				rels[rel] = true
			}
		}
	}
	var subs []Sub
	var ids []string
	for rel := range rels {
		m := metas[rel]
		tid := codexID(rel)
		name := componentName(pick(m.role, m.nickname))
		if name == "" {
			name = tid
		}
		model, _ := codexFacts(r, rel)
		subs = append(subs, Sub{Name: name, Model: model, Transcript: rel})
		ids = append(ids, tid)
	}
	return uniqueSubs(subs, ids)
}

// Resume implements Harness: codex resume <sid>. Codex finds the rollout by
// id wherever it is, but the caller still starts it in the session's cwd.
// A thread with no rollout yet (never prompted) is refused: there is
// nothing for "codex resume" to open.
func (codex) Resume(a Agent, env Env) ([]string, error) {
	if !isUUID(a.Session) {
		return nil, unresolved("codex", a)
	}
	if !haveTranscript(a, env) {
		return nil, nothingYet("codex", a, "session "+a.Session+" has no rollout; Codex writes it at the first prompt")
	}
	return []string{"codex", "resume", a.Session}, nil
}
