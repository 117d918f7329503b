package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
	"github.com/9harness/9harness/internal/sockpath"
	"github.com/spf13/pflag"
)

// Globals is how to reach the daemon: its socket, or ssh to a relay. Its
// flags are accepted before the command and, through FlagSet, after it.
type Globals struct {
	Flags      *pflag.FlagSet
	Cmd        string
	Sock       string
	Aname      string   // what the local socket's session attaches
	SSHDest    string   // "": the local socket
	SSHDests   []string // every --ssh, in order (ps takes several)
	SSHOptions []string
	SSHCmd     string
	NoForward  bool // --ssh-forward=no

	// Helps is each command's full help, for COMMAND --help; Version is
	// what --version prints.
	Helps   map[string]string
	Version string
}

// NewGlobals is the global flags, unparsed, of a 9harness whose commands'
// helps and version string are those given.
func NewGlobals(version string, helps map[string]string) *Globals {
	g := &Globals{Helps: helps, Version: version}
	fs := pflag.NewFlagSet("9harness", pflag.ContinueOnError)
	fs.StringVarP(&g.Sock, "socket", "s", sockpath.Default(), "")
	// Repeatable for ps (a fleet); once for every other command.
	fs.Func("ssh", "", func(v string) error {
		g.SSHDest = v
		g.SSHDests = append(g.SSHDests, v)
		return nil
	})
	// StringArray, not StringSlice: an ssh option may hold a comma.
	fs.StringArrayVar(&g.SSHOptions, "ssh-opt", nil, "")
	fs.StringVar(&g.SSHCmd, "ssh-cmd", client.DefaultRelayCommand, "")
	fs.Func("ssh-forward", "", func(v string) error {
		switch v {
		case "yes":
			g.NoForward = false
		case "no":
			g.NoForward = true
		default:
			return fmt.Errorf("want yes or no, not %q", v)
		}
		return nil
	})
	fs.StringVar(&g.Aname, "aname", "/", "")
	fs.Bool("version", false, "")
	g.Flags = fs
	return g
}

// FlagSet is a command's FlagSet, holding the global flags too, so that
// `9harness ls / -s SOCK` means what `9harness -s SOCK ls /` does.
func (g *Globals) FlagSet(cmd string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(cmd, pflag.ContinueOnError)
	fs.AddFlagSet(g.Flags)
	return fs
}

// Check validates the global flags once the command's own are parsed; a
// problem is a usage error, printed, with status ExitUsage.
func (g *Globals) Check(stderr io.Writer) (*client.SSH, int) {
	if len(g.SSHDests) > 1 {
		fmt.Fprintf(stderr, "9harness %s: --ssh is given once, except to ps, wait and events\n", g.Cmd)
		return nil, ExitUsage
	}
	if g.SSHDest == "" && (g.Flags.Changed("ssh-opt") || g.Flags.Changed("ssh-cmd")) {
		fmt.Fprintln(stderr, "9harness: --ssh-opt and --ssh-cmd need --ssh DEST")
		return nil, ExitUsage
	}
	if g.Flags.Changed("aname") && (g.SSHDest != "" || g.Cmd == "mount") {
		fmt.Fprintln(stderr, "9harness: --aname is for ls, cat and stat on a local socket, not with --ssh or mount")
		return nil, ExitUsage
	}
	if g.SSHDest == "" {
		return nil, ExitOK
	}
	s := client.SSH{Dest: g.SSHDest, Options: g.SSHOptions, Command: g.SSHCmd, NoForward: g.NoForward}
	if g.Flags.Changed("socket") {
		s.Socket = g.Sock
	}
	if _, err := s.Argv(); err != nil {
		fmt.Fprintf(stderr, "9harness: %v\n", err)
		return nil, ExitUsage
	}
	return &s, ExitOK
}

// LocalOnly refuses --ssh for a command that works on this machine only.
func (g *Globals) LocalOnly(stderr io.Writer, why string) bool {
	if !g.Remote() {
		return true
	}
	fmt.Fprintf(stderr, "9harness: %s\n", why)
	return false
}

// Dial reaches the daemon; the error is one line that says what to do.
func (g *Globals) Dial() (*client.Client, error) {
	if g.Remote() {
		s, _ := g.Check(io.Discard)
		if s == nil {
			return nil, errors.New("bad --ssh flags")
		}
		return client.DialSSH(context.Background(), *s)
	}
	c, err := client.DialAname(g.Sock, g.Aname)
	if err != nil {
		return nil, client.DialError(g.Sock, err)
	}
	return c, nil
}

// Connect is Dial for a command: on failure it prints the line and gives
// the exit status.
func (g *Globals) Connect(stderr io.Writer) (*client.Client, int) {
	if _, status := g.Check(stderr); status != ExitOK {
		return nil, status
	}
	c, err := g.Dial()
	if err != nil {
		fmt.Fprintf(stderr, "9harness: %v\n", err)
		return nil, ExitError
	}
	return c, ExitOK
}

// Dialer is how a fleet command reaches its hosts: this machine's socket
// (whatever --ssh says), and the command line's ssh settings.
func (g *Globals) Dialer() *fleet.Dialer {
	return &fleet.Dialer{
		Local: func() (*client.Client, error) {
			local := *g
			local.SSHDest = ""
			return local.Dial()
		},
		SSHDests:   g.SSHDests,
		SSHOptions: g.SSHOptions,
		SSHCmd:     g.SSHCmd,
		SSHCmdSet:  g.Flags.Changed("ssh-cmd"),
		NoForward:  g.NoForward,
		ForwardSet: g.Flags.Changed("ssh-forward"),
	}
}

// Remote tells whether the tree is another machine's.
func (g *Globals) Remote() bool { return g.SSHDest != "" }
