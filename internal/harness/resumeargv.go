package harness

import (
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/9harness/9harness/internal/errs"
	"github.com/9harness/9harness/internal/shquote"
)

// keep is one flag of an agent's own command line that its resume keeps,
// so that the session comes back as it was started (its model, profile,
// sandbox, approval and config overrides), not with the harness's
// defaults.
type keep struct {
	names []string // the spellings accepted in the agent's argv, "-c" and "--config"
	emit  string   // the one spelling emitted
	value bool     // takes a value
	// many: the flag is variadic (commander's "<dirs...>"): the words after
	// its value that are not options are more values, as the harness
	// itself reads them.
	many bool
	max  int                 // bound of a value, in bytes
	ok   func(v string) bool // a further check of a value; nil for none
}

// word is a value made of letters, digits and '-', '_', '.': a mode or a
// sandbox policy's name.
func word(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// keeps is, per harness, the flags a resume keeps. Everything else in the
// agent's argv is dropped: a prompt, a session of its own (--resume,
// --session-id), a one-shot mode, anything unknown. Each list is what a
// resume needs to come back the same (its model, backend, sandbox and
// permissions), and nothing that could make it another program. Each is
// its Spec's Keep (register fills the map).
var keeps = map[string][]keep{}

// valueFlags is, per harness, the flags that take a value, so that a
// dropped flag's value is skipped with it and never read as a flag: its
// Spec's Flags (register fills the map).
var valueFlags = map[string]flags{}

// Bounds of what a resume keeps in all: beyond them the rest is dropped.
const (
	maxKeptValues = 64
	maxKeptBytes  = 64 << 10
)

// ResumeArgv is h.Resume's fixed argv with the allowlisted flags of the
// agent's own command line (a.Argv, as the scan read it) added: each in one
// fixed spelling, its value validated and passed as an argv element of its
// own, exactly as the user gave it at the start (so nothing is widened).
// kept and dropped name the flags by name only, never a value: values of
// --settings, --mcp-config and -c can hold keys, so only the names may go
// to a journal. A harness whose argv is hidden (pi's process.title) keeps
// nothing, because nothing is visible.
//
// The flags go after the fixed argv, except for a harness whose Spec says
// FlagsBeforeID, where they go between the subcommand and the session id
// of a three-word argv (codex resume [OPTIONS] <id>).
func ResumeArgv(h Harness, a Agent, env Env) (argv, kept, dropped []string, err error) {
	fixed, err := h.Resume(a, env)
	if err != nil {
		return nil, nil, nil, err
	}
	extra, kept, dropped := keptFlags(h.Name(), agentArgs(a.Argv))
	if sp, _ := SpecOf(h.Name()); sp.FlagsBeforeID && len(fixed) == 3 {
		argv = append(append(append([]string{}, fixed[:2]...), extra...), fixed[2])
	} else {
		argv = append(append([]string{}, fixed...), extra...)
	}
	return argv, kept, dropped, nil
}

// agentArgs is the arguments of an agent's command line: after argv[0], or
// after the script a node or bun runs.
func agentArgs(argv []string) []string {
	argv = normArgv(argv)
	if len(argv) == 0 {
		return nil
	}
	if b := base(argv[0]); isNode(b) || b == "bun" {
		_, rest := interpScript(argv[1:])
		return rest
	}
	return argv[1:]
}

// keptFlags reads args with harness's allowlist. It returns the kept flags
// as argv elements, and the names of the kept and the dropped flags.
func keptFlags(harness string, args []string) (out, kept, dropped []string) {
	list := keeps[harness]
	known := valueFlags[harness]
	bytes, values := 0, 0
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break // the rest is a prompt
		}
		if len(arg) < 2 || arg[0] != '-' {
			continue // a positional word: a subcommand, a prompt
		}
		name, val, inline := arg, "", false
		if j := strings.IndexByte(arg, '='); j > 0 {
			name, val, inline = arg[:j], arg[j+1:], true
		}
		k := findKeep(list, name)
		if k == nil {
			note(&dropped, flagName(arg))
			if !inline && known.value[name] && i+1 < len(args) {
				i++ // its value goes with it
			}
			continue
		}
		if !k.value {
			if inline {
				note(&dropped, k.emit)
				continue
			}
			if values < maxKeptValues {
				out = append(out, k.emit)
				values++
				note(&kept, k.emit)
			} else {
				note(&dropped, k.emit)
			}
			continue
		}
		var vals []string
		if inline {
			vals = []string{val}
		} else if vals, i = flagValues(args, i, k.many); vals == nil {
			// No value, or the next word is an option: the harness
			// would not have taken it as this flag's value either.
			note(&dropped, k.emit)
			continue
		}
		good := true
		size := 0
		for _, v := range vals {
			good = good && validValue(v, k)
			size += len(k.emit) + len(v)
		}
		if !good || values+len(vals) > maxKeptValues || bytes+size > maxKeptBytes {
			note(&dropped, k.emit)
			continue
		}
		for _, v := range vals {
			out = append(out, k.emit, v)
		}
		values += len(vals)
		bytes += size
		note(&kept, k.emit)
	}
	return out, kept, dropped
}

// flagValues is the values of the flag at args[i] whose value is not
// inline: the next word unless it is an option (none, nil, then), and
// with many the words after it up to the next option. It returns the
// index of the last word it took.
func flagValues(args []string, i int, many bool) ([]string, int) {
	if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
		return nil, i
	}
	i++
	vals := []string{args[i]}
	for many && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
		i++
		vals = append(vals, args[i])
	}
	return vals, i
}

// note adds n to names unless it is there.
func note(names *[]string, n string) {
	if !slices.Contains(*names, n) {
		*names = append(*names, n)
	}
}

func findKeep(list []keep, name string) *keep {
	for i := range list {
		for _, n := range list[i].names {
			if n == name {
				return &list[i]
			}
		}
	}
	return nil
}

// validValue reports whether v can be passed on as one argv element: not
// empty, within the flag's bound, valid UTF-8 with no control character
// (no NUL, no newline), not option-shaped, and what the flag's own check
// allows.
func validValue(v string, k *keep) bool {
	if v == "" || len(v) > k.max || v[0] == '-' || !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return k.ok == nil || k.ok(v)
}

// flagName is what a journal may say of a dropped argument: its name only.
// A long option is named up to its '='; a short one by its first letter
// alone ("-cKEY=V" is "-c"), because clap and commander read the rest of
// such a word as its value. A name that is not plain letters, digits and
// dashes is "-?", since it is not a flag any harness has.
func flagName(arg string) string {
	name := arg
	if !strings.HasPrefix(arg, "--") {
		name = arg[:2]
	} else if j := strings.IndexByte(arg, '='); j > 0 {
		name = arg[:j]
	}
	if len(name) > 64 {
		return "-?"
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "-?"
		}
	}
	return name
}

// ResumeCommand is the one shell line that does what a move of a runs to
// resume its session: cd to the agent's directory, then ResumeArgv, each
// word quoted for a POSIX shell. It is refused where the move would be
// refused for the resume itself: no directory known, a harness or session
// that cannot be resumed (with Resume's reason), no resume command. Kept
// flag values are written in full, so the line is the owner's alone.
func ResumeCommand(h Harness, a Agent, env Env) (string, error) {
	if a.Cwd == "" {
		return "", errs.E("harness.ResumeCommand", errs.NotExist, "", errors.New("the agent's directory could not be read"))
	}
	argv, _, _, err := ResumeArgv(h, a, env)
	if err != nil {
		return "", err
	}
	if len(argv) == 0 {
		return "", errs.E("harness.ResumeCommand", errs.Permission, "", errors.New(h.Name()+" has no resume command"))
	}
	return ResumeLine(a.Cwd, argv), nil
}

// ResumeLine is argv run in dir as one POSIX shell line.
func ResumeLine(dir string, argv []string) string {
	return "cd " + shquote.Quote(dir) + " && " + shquote.Join(argv)
}
