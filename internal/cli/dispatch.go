package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/9harness/9harness/internal/flagerr"
	"github.com/9harness/9harness/internal/sockpath"
)

// A Command is one word of 9harness: its name, its full help (for
// COMMAND --help and help COMMAND; "" keeps it out of both, as the shell
// completions' __complete is) and what runs it.
type Command struct {
	Name string
	Help string
	Run  func(g *Globals, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// NoStdin is a Command's Run for a command that reads no standard input.
func NoStdin(run func(g *Globals, args []string, stdout, stderr io.Writer) int) func(*Globals, []string, io.Reader, io.Writer, io.Writer) int {
	return func(g *Globals, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		return run(g, args, stdout, stderr)
	}
}

// Program is a whole 9harness: its commands, its usage (a format whose
// one verb is the default socket) and the version it prints. help and
// version are its own: they print what it knows.
type Program struct {
	Usage    string
	Version  string
	Commands []Command
}

// VersionHelp is version --help.
const VersionHelp = `usage: 9harness version

Print this client's version, as 9harness --version does. The daemon's is
in 9harnessd --version, and on the first line it logs.

Options:
  -h, --help  this text
`

// Run parses the global flags up to the command's name and runs the
// command with the rest: the exit status.
func (p Program) Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Whatever any command says on standard error is text (TextWriter):
	// much of it comes from other hosts.
	stderr = NewTextWriter(stderr)
	g := NewGlobals(p.Version, p.helps())
	cmd, rest, status, ok := p.parseGlobals(g, args, stdout, stderr)
	if !ok {
		return status
	}
	g.Cmd = cmd
	switch cmd {
	case "version":
		return runVersion(g, rest, stdout, stderr)
	case "help":
		return p.help(g.Helps, rest, stdout, stderr)
	}
	for _, c := range p.Commands {
		if c.Name == cmd {
			return c.Run(g, rest, stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "9harness: unknown command %q (try '9harness --help')\n", cmd)
	return ExitUsage
}

// helps is each command's full help, by name.
func (p Program) helps() map[string]string {
	helps := map[string]string{"version": VersionHelp}
	for _, c := range p.Commands {
		if c.Help != "" {
			helps[c.Name] = c.Help
		}
	}
	return helps
}

// parseGlobals parses the flags before the command, and answers --help
// and --version itself; ok is false when it has (or on a usage error).
func (p Program) parseGlobals(g *Globals, args []string, stdout, stderr io.Writer) (cmd string, rest []string, status int, ok bool) {
	top := pflag.NewFlagSet("9harness", pflag.ContinueOnError)
	top.AddFlagSet(g.Flags)
	// The command's own FlagSet parses everything after its name.
	top.SetInterspersed(false)
	top.SetOutput(io.Discard)
	top.Usage = func() {}
	if err := top.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, p.Usage, sockpath.Default())
			return "", nil, ExitOK, false
		}
		fmt.Fprintf(stderr, "9harness: %s (try '9harness --help')\n", flagerr.Describe(err, args))
		return "", nil, ExitUsage, false
	}
	if g.Flags.Changed("version") {
		fmt.Fprintln(stdout, "9harness", g.Version)
		return "", nil, ExitOK, false
	}
	if top.NArg() == 0 {
		fmt.Fprintln(stderr, "9harness: no command given (try '9harness --help')")
		return "", nil, ExitUsage, false
	}
	return top.Arg(0), top.Args()[1:], ExitOK, true
}

// help is 9harness help [COMMAND]: the usage, or one command's help.
func (p Program) help(helps map[string]string, rest []string, stdout, stderr io.Writer) int {
	if len(rest) == 0 {
		fmt.Fprintf(stdout, p.Usage, sockpath.Default())
		return ExitOK
	}
	h, ok := helps[rest[0]]
	if !ok || len(rest) > 1 {
		fmt.Fprintf(stderr, "9harness help: no command %q (try '9harness --help')\n", strings.Join(rest, " "))
		return ExitUsage
	}
	io.WriteString(stdout, h)
	return ExitOK
}

// runVersion is 9harness version.
func runVersion(g *Globals, args []string, stdout, stderr io.Writer) int {
	rest, status, ok := g.ParseFlags(g.FlagSet("version"), args, true, stdout, stderr)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "9harness version: unexpected argument %q (try '9harness version --help')\n", rest[0])
		return ExitUsage
	}
	fmt.Fprintln(stdout, "9harness", g.Version)
	return ExitOK
}
