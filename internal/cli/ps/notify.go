package ps

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// waitNotices tracks which agents are waiting, to announce each wait once.
type waitNotices struct {
	waiting map[cli.AgentKey]aWait
}

// aWait is one wait: what it is for, and when it began ("" where the
// harness does not say).
type aWait struct{ what, since string }

// changes returns the agents that started waiting since the last call (at
// the first call, every waiting agent), in the table's order. An agent
// still waiting for the same thing is not returned again; one that waits
// for something else (a second permission, asked before the poll saw it
// work) is, and so is one that worked or went idle and waits again. A wait
// whose start is unchanged is the same wait even if what it is for is now
// told better: Claude's registry says "permission prompt" a moment before
// its transcript names the tool ("approve Bash"), and one prompt is one
// notice.
func (n *waitNotices) changes(agents []client.Agent) []client.Agent {
	now := map[cli.AgentKey]aWait{}
	var out []client.Agent
	for _, a := range agents {
		if a.State != "waiting" {
			continue
		}
		k := cli.KeyOf(a)
		now[k] = aWait{a.Waiting, a.Since}
		w, ok := n.waiting[k]
		if !ok || (w.what != a.Waiting && (a.Since == "" || w.since != a.Since)) {
			out = append(out, a)
		}
	}
	n.waiting = now
	return out
}

// maxNotifying bounds the commands that run at once; more wait their turn.
const maxNotifying = 8

// notifier runs --notify's command for each agent that starts waiting.
type notifier struct {
	cmd    string
	host   string
	output io.Writer // the commands' standard output and error
	report func(string)
	slots  chan struct{}
	wg     sync.WaitGroup
}

func newNotifier(cmd, host string, output io.Writer, report func(string)) *notifier {
	return &notifier{cmd: cmd, host: host, output: output, report: report, slots: make(chan struct{}, maxNotifying)}
}

// run starts the command for a, without waiting for it: a slow command
// does not hold up the watch. The agent's facts are only in the
// environment: CMD is the one word the shell parses.
func (n *notifier) run(a client.Agent) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.slots <- struct{}{}
		defer func() { <-n.slots }()
		cmd := exec.Command("/bin/sh", "-c", n.cmd)
		cmd.Env = cli.NotifyCmdEnv(os.Environ(), a, n.host)
		cmd.Stdout, cmd.Stderr = n.output, n.output
		if err := cmd.Run(); err != nil {
			n.report(fmt.Sprintf("9harness ps: --notify for %s/%d: %v", fleet.Printable(a.Harness), a.PID, err))
		}
	}()
}

// notifyLoop follows the watch until ctx ends, running the command for each agent
// that starts waiting; failures go to report, each once in a row, and ""
// when the daemon answers again.
func notifyLoop(ctx context.Context, w cli.AgentWatch, n *notifier, report func(string)) {
	var seen waitNotices
	last := ""
	for {
		agents, err := w.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := "9harness ps: " + err.Error(); msg != last {
				report(msg)
				last = msg
			}
			continue
		}
		if last != "" {
			report("")
			last = ""
		}
		for _, a := range seen.changes(agents) {
			n.run(a)
		}
	}
}

// watchNotify is ps --watch --notify CMD: on a terminal the table is
// redrawn as by --watch while a second connection follows the agents that
// start waiting; off a terminal only the polling runs, until a signal.
func watchNotify(g *cli.Globals, c *client.Client, o psOptions, home string, term *os.File, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := cli.NotifyHost(g)
	if term != nil {
		var mu sync.Mutex
		note := ""
		report := func(s string) {
			mu.Lock()
			note = s
			mu.Unlock()
		}
		n := newNotifier(o.notify, host, io.Discard, report)
		w := cli.NewEventWatch(g, nil, o.harnesses)
		go func() {
			notifyLoop(ctx, w, n, report)
			w.Close()
		}()
		status := watchPs(g, c, o, home, term, func() string {
			mu.Lock()
			defer mu.Unlock()
			return note
		})
		cancel()
		return status
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		cancel()
	}()
	var mu sync.Mutex
	report := func(s string) {
		if s == "" {
			return // the daemon answers again: nothing to say
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stderr, s)
	}
	n := newNotifier(o.notify, host, stderr, report)
	w := cli.NewEventWatch(g, c, o.harnesses)
	defer w.Close()
	notifyLoop(ctx, w, n, report)
	// The commands already started finish: a notification is not cut off.
	n.wg.Wait()
	return cli.ExitOK
}
