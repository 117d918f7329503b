package harness

import (
	"strings"

	"github.com/9harness/9harness/internal/proc"
)

// pi is plain pi (badlogic/pi-mono, npm @mariozechner/pi-coding-agent, now
// @earendil-works/pi-coding-agent; root ~/.pi, sessions under
// agent/sessions/). Its transcripts are the format omp forked, in the
// legacy dir scheme only: agent/sessions/--<cwd>--/<ts>_<uuid>.jsonl.
//
// Processes: argv[0] "pi" (a compiled binary, or node's process.title), or
// node/bun running …/pi or a pi-coding-agent cli. omp's package is also
// named pi-coding-agent (@oh-my-pi/pi-coding-agent): a path under oh-my-pi
// is omp's, never pi's.
//
// Resolution: the held transcript (via fd) if any; else the transcript
// 9harness itself named when it relaunched this very process (via
// relaunch; pi 0.73 hides its argv behind process.title, holds no fd and
// writes nothing on resume until its next answer); else the newest
// transcript in --<cwd>-- whose header names the cwd and that was written
// since the process started (via dir); else the cwd's one transcript (via
// only). Two or more candidates are never guessed between (via ambiguous).
// A session without a session_info name is titled by its first user
// message, as pi's own picker does.
type pi struct{}

func (pi) Name() string { return "pi" }

// Classify implements Harness.
func (pi) Classify(p, parent proc.Proc) Kind {
	argv, b := program(p)
	if argv == nil {
		return None
	}
	switch {
	case b == "pi":
		return piKind(argv[1:])
	case b == "bun" || isNode(b):
		script, rest := interpScript(argv[1:])
		if strings.Contains(script, "oh-my-pi") {
			return None
		}
		if base(script) == "pi" || (strings.Contains(script, "pi-coding-agent") && (strings.HasSuffix(script, "/cli.js") || strings.HasSuffix(script, "/cli.ts"))) {
			return piKind(rest)
		}
	}
	return None
}

// Resolve implements Harness.
func (pi) Resolve(env Env, p proc.Proc) Agent {
	a, _ := start("pi", env, p)
	resolvePi(&a, env, p, "agent/sessions", []string{piLegacyDir(cleanCwd(a.Cwd))}, true)
	return a
}

// Resume implements Harness: pi --session <absolute transcript path>.
func (pi) Resume(a Agent, env Env) ([]string, error) {
	return piResume("pi", a, env)
}

var _ = register(pi{}, &piSpec)

// piKeep are the flags a resume of pi (or omp, whose command line is
// pi's) keeps.
var piKeep = []keep{
	{names: []string{"--provider"}, emit: "--provider", value: true, max: 256},
	{names: []string{"--model"}, emit: "--model", value: true, max: 256},
}

var piSpec = Spec{
	Name:    "pi",
	Order:   40,
	Mirrors: []Mirror{{At: "", Rel: "agent"}},
	Grantee: []string{"sessions", "skills"},
	// agent/sessions/<--home-u-src-x-->/<ts>_<id>.jsonl. Its rewind
	// extensions keep their copies as refs of the project's repository.
	SlugDirs: []string{"agent/sessions"},
	Credentials: []Credential{
		{"models.json", "pi ~/.pi/agent/models.json: custom providers with apiKey"},
		{"auth.json", "pi ~/.pi/agent/auth.json"},
	},
	Env:      []string{"PI_CODING_AGENT_DIR"},
	Keep:     piKeep,
	Flags:    piFlags,
	Summed:   true,
	Counter:  func() counter { return &piTokens{} },
	Verified: "1.6.0",
	Doc: Doc{
		Title:   "pi",
		Root:    "~/.pi",
		Process: "`pi` (its argv is hidden by process.title)",
		Via:     "`fd`, `dir`, `only` (the one transcript of the cwd), `relaunch` after a move",
		Resume:  "`pi --session FILE`",
		RealCLI: "1.6.0 (`@earendil-works/pi-coding-agent`; 0.73.1's files and processes are the same)",
	},
}
