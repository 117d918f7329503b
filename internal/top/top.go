// Package top is 9harness top: a full-screen live view of every agent of
// every host, fed by each host's /active/events. A host's table is read
// when it comes up (and after the daemon says lines were lost), an
// agent's row when an event names it; while nothing changes, nothing is
// read. The view writes nothing to the tree and sends no key to an agent:
// its actions run programs (tmux or zmx attach, 9harness move) in the
// foreground, the view suspended meanwhile.
package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// Config is what the command line says.
type Config struct {
	Dialer    *fleet.Dialer
	Hosts     []client.Host // the hosts to follow; this machine alone is {Name: client.LocalHost}
	Timeout   time.Duration // per host: a host silent this long is marked down
	Harnesses []string      // only these harnesses' agents; none: all
	Once      bool          // print one frame and exit
	Counts    bool          // show the view's own read counts in the header
	Home      string        // this machine's $HOME, shown as ~
	// MoveArgv is the command that moves agent (HOST:HARNESS/PID) into
	// session name, in tmux when tmux is set: 9harness move with the
	// command line's own reach flags.
	MoveArgv func(agent, name string, tmux bool) []string
	In, Out  *os.File
	Stderr   io.Writer
}

// Counts are the reads the view made of the daemons, for the tests that
// check it reads nothing while nothing changes.
type Counts struct {
	Tables atomic.Int64 // whole-table reads
	Rows   atomic.Int64 // one agent's row
}

// quitGrace is how long after SIGTERM, SIGINT or SIGHUP the view may take
// to end before it is stopped (bubbletea's Kill: the terminal is still
// restored, without waiting for the input loop).
const quitGrace = time.Second

// Run shows the view until q, Ctrl-C, SIGTERM or SIGHUP; its status is
// 0, or 1 when the terminal could not be used or was hung up.
func Run(cfg Config) int {
	colors(cfg.Out)
	if cfg.Once {
		return once(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := newModel(cfg, fleet.Follow(ctx, cfg.Dialer, cfg.Hosts, cfg.Timeout))
	// Signals are this view's own: bubbletea's handler sends its quit
	// without looking whether the program still reads messages, and a
	// quit that does not end the program must not leave it running.
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithInput(cfg.In), tea.WithOutput(cfg.Out), tea.WithoutSignalHandler())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	hup := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			if s == syscall.SIGHUP {
				close(hup) // the terminal is gone: nobody to tell
			}
			p.Quit()
			select {
			case <-time.After(quitGrace):
				p.Kill()
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}()
	final, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) {
		select {
		case <-hup:
			return 1 // stopped after a hang-up: nobody to tell
		default:
			err = fmt.Errorf("did not end within %v of a signal; stopped", quitGrace)
		}
	}
	if err != nil {
		fmt.Fprintf(cfg.Stderr, "9harness top: %v\n", err)
		return 1
	}
	if fm, ok := final.(*model); ok && fm.printOnExit != "" {
		fmt.Fprintln(cfg.Out, fm.printOnExit)
	}
	return 0
}

// colors picks the colour profile: none with NO_COLOR or off a colour
// terminal; the layout never needs colour to tell states apart.
func colors(out *os.File) {
	if os.Getenv("NO_COLOR") != "" {
		lipgloss.SetColorProfile(termenv.Ascii)
		return
	}
	lipgloss.SetColorProfile(termenv.NewOutput(out).EnvColorProfile())
}

// once prints one frame: every host's table read once, the frame as the
// view would draw it at the terminal's width (80 off a terminal, or
// COLUMNS), without the alternate screen. Its status is 0, or 3 when
// some host did not answer.
func once(cfg Config) int {
	f := fleet.New(cfg.Dialer, cfg.Hosts, cfg.Timeout)
	defer f.Close()
	rows, failed := f.Query(cfg.Harnesses)
	m := newModel(cfg, nil)
	m.width, m.height = fleet.TermSize(cfg.Out)
	now := time.Now()
	down := map[string]bool{}
	for _, fl := range failed {
		down[fl.Host] = true
		m.hostDown(fl.Host, fl.Err, now)
		fmt.Fprintf(cfg.Stderr, "9harness top: %s: %s\n", fleet.Printable(fl.Host), fleet.Printable(fl.Err.Error()))
	}
	for _, h := range cfg.Hosts {
		if !down[h.Name] {
			m.hostUp(h.Name, now)
		}
	}
	for _, r := range rows {
		m.put(r.Host, r.Agent)
	}
	m.resort()
	m.once = true
	fmt.Fprint(cfg.Out, m.View())
	switch {
	case len(failed) == 0:
		return 0
	case len(failed) == len(cfg.Hosts):
		return 1
	}
	return 3
}
