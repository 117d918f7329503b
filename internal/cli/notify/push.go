// Package notify is `9harness notify`: it follows one host or several,
// and delivers each transition the config chooses (an agent starts
// waiting, goes idle or exits) to ntfy, a webhook, the desktop or a
// command, once each, keeping what it delivered in a state file.
package notify

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/cli"
	"github.com/9harness/9harness/internal/client"
	"github.com/9harness/9harness/internal/fleet"
)

// Help is the text of `9harness notify --help`.
const Help = `usage: 9harness [-s SOCKET | --ssh DEST] notify [--config FILE] [--test]
       9harness [--ssh DEST]... notify --all | --hosts FILE [--config FILE]

Deliver "an agent needs you" wherever you are: follow the daemon's
/active/events (with --all, every host's, as events --all does) and send
each transition the config chooses to each target it names: an ntfy
topic, a webhook, the desktop's notifications, a command. It runs until
interrupted; the user unit 9harness-notify.service keeps it running
(systemctl --user enable --now 9harness-notify.service).

Transitions (the config's "on" line; all three by default):
  waiting   an agent starts waiting for you (a permission, a question)
  idle      an agent goes idle after a turn of at least idle-after (1m)
  exit      an agent exits

A transition is its host, harness, pid, start time, state and since.
Each reaches each target once: what was delivered is kept in
$XDG_STATE_HOME/9harness/notify.state (default ~/.local/state), so a
restart of notify or of the daemon, or a host that comes back, sends
nothing twice; an agent that exited or went idle while notify was not
running is told when it runs again. A delivery that fails is tried again
after 1 s, 2 s, 4 s ... up to 1 min between attempts, and given up after
an hour (one line on standard error). A target that took a message but
whose answer was lost (notify killed at that moment) may get it twice.

The config, $XDG_CONFIG_HOME/9harness/notify.conf (default
~/.config/9harness/notify.conf), one setting a line, # comments:

  on waiting idle exit
  idle-after 1m
  harness claude codex
  target ntfy topic=alice-agents token-file=~/.config/9harness/ntfy.token
  target webhook url=https://hooks.example.net/agents token-credential=hook
  target desktop
  target command notify-send "$HARNESS_NAME/$HARNESS_PID" "$HARNESS_STATE"

  ntfy     POST ntfy's JSON message to the server's root (url=, default
           https://ntfy.sh, a self-hosted one too): topic=, title, message,
           tags and priority (priority=1..5 for a wait; default 4)
  webhook  POST a JSON object to url=: id (the same for every delivery of
           one transition), host, harness, pid, started and since (RFC 3339),
           state (waiting, idle or exit), waiting, cwd, title
  desktop  org.freedesktop.Notifications.Notify on the session bus; the
           body's markup characters (& < >) are escaped
  command  the rest of the line, run by /bin/sh -c, the facts only in its
           environment, as ps --notify does: HARNESS_NAME, HARNESS_PID,
           HARNESS_STATE, HARNESS_WAITING, HARNESS_CWD, HARNESS_TITLE,
           HARNESS_HOST, HARNESS_SINCE, HARNESS_ID; exit 0 is delivered

  name=NAME names a target (default: its URL and topic, or its kind); its
  deliveries are kept under that name. A token (sent as Authorization:
  Bearer) comes from token-file=FILE, which must be yours and of mode 0600
  or 0400, or token-credential=NAME, the unit's LoadCredential=NAME:FILE
  ($CREDENTIALS_DIRECTORY/NAME); never from the command line, and it is
  never printed. HTTP redirects are not followed.

The message says the host, harness, pid, directory and title and what
the agent waits for; nothing else of its transcript. Every target gets
control characters made printable (as ps shows them).

Options:
  --config FILE      the config (default ~/.config/9harness/notify.conf)
  --test             send one test message to each target and exit
  --all              this machine and every host of the hosts file
  --hosts FILE       the hosts of FILE (with --all: instead of
                     ~/.config/9harness/hosts)
  -h, --help         this text

Exit status: 0 when interrupted, or --test reached every target; 1 when
--test failed for a target, or the state file cannot be written; 2 for
a usage or config error (FILE:LINE and what is wrong; nothing is sent).
`

// Retry backoff of a delivery.
const (
	pushMinBackoff = time.Second
	pushMaxBackoff = time.Minute
)

// Run is `9harness notify`.
func Run(g *cli.Globals, args []string, stdout, stderr io.Writer) int {
	var (
		confFile string
		test     bool
	)
	fs := g.FlagSet("notify")
	fs.StringVar(&confFile, "config", "", "")
	fs.BoolVar(&test, "test", false, "")
	ff := cli.AddFleetFlags(fs)
	rest, status, ok := g.ParseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return status
	}
	if !cli.NoOperands("notify", rest, stderr) {
		return cli.ExitUsage
	}
	if confFile == "" {
		confFile = pushConfigPath()
	}
	cfg, err := loadPushConfig(confFile)
	if err != nil {
		fmt.Fprintf(stderr, "9harness notify: %v\n", err)
		return cli.ExitUsage
	}
	if test {
		return pushTest(g, cfg, stdout, stderr)
	}
	var hosts []client.Host
	if ff.All || fs.Changed("hosts") || len(g.SSHDests) > 0 {
		if hosts, status = cli.FleetHosts(g, *ff, fs.Changed("hosts"), stderr); hosts == nil {
			return status
		}
	} else {
		if _, status := g.Check(stderr); status != cli.ExitOK {
			return status
		}
		hosts = []client.Host{{Name: client.LocalHost}}
	}
	lock, err := lockPushState(pushStatePath())
	if err != nil {
		fmt.Fprintf(stderr, "9harness notify: %v\n", err)
		return cli.ExitError
	}
	defer lock.Close()
	store, err := openPushStore(pushStatePath())
	if err != nil {
		fmt.Fprintf(stderr, "9harness notify: %v\n", err)
		return cli.ExitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return pushRun(ctx, g, cfg, store, hosts, ff.Timeout, stderr)
}

// shownHost is a host's name in a message: this machine's short name for
// the local one.
func shownHost(g *cli.Globals, name string) string {
	if name == client.LocalHost {
		local := *g
		local.SSHDest = ""
		return cli.NotifyHost(&local)
	}
	return name
}

// pushTest sends one made-up wait to each target.
func pushTest(g *cli.Globals, cfg *pushConfig, stdout, stderr io.Writer) int {
	cwd, _ := os.Getwd()
	shown := shownHost(g, client.LocalHost)
	now := time.Now().UTC().Format(time.RFC3339)
	t := transition{Host: client.LocalHost, Shown: shown, Harness: "9harness", PID: os.Getpid(), State: "waiting",
		Since: now, Waiting: "nothing: a test of 9harness notify", Cwd: cwd, Title: "a test message"}
	t.ID = transitionID(t.Host, t.Harness, t.PID, 0, "test", now)
	status := cli.ExitOK
	for _, target := range cfg.targets {
		if err := deliver(context.Background(), target, t); err != nil {
			fmt.Fprintf(stderr, "9harness notify: %s: %v\n", target, err)
			status = cli.ExitError
			continue
		}
		fmt.Fprintf(stdout, "sent to %s\n", target)
	}
	return status
}

// pushRun follows the hosts and delivers until ctx ends. Each host's
// table is read when it comes up and after each line of its events
// (cli.FleetTables), compared with the agents kept from the last read,
// and what changed is queued in the state file before any target is
// tried; one goroutine per target delivers its queue in order.
func pushRun(ctx context.Context, g *cli.Globals, cfg *pushConfig, store *pushStore, hosts []client.Host, timeout time.Duration, stderr io.Writer) int {
	var names []string
	for _, t := range cfg.targets {
		names = append(names, t.name)
	}
	if err := store.forgetTargets(names); err != nil {
		fmt.Fprintf(stderr, "9harness notify: %s: %v\n", store.path, err)
		return cli.ExitError
	}
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "9harness notify: "+format+"\n", a...)
	}
	say("following %d host(s) for %d target(s); %s", len(hosts), len(cfg.targets), strings.Join(cfg.on, ", "))
	d := startDeliveries(ctx, store, cfg.targets, say)
	// The deliveries under way finish (each is bounded); the next ones
	// wait for the next run.
	defer d.wg.Wait()

	tables := cli.NewFleetTables(ctx, g, hosts, timeout, nil)
	for {
		t, ok := tables.Next(ctx.Done())
		switch {
		case !ok:
			return cli.ExitOK
		case t.Err != nil:
			say("%s: %v", fleet.Printable(t.Host), t.Err)
		case t.Back:
			say("%s: back", fleet.Printable(t.Host))
		default:
			ts, err := store.observe(t.Host, shownHost(g, t.Host), t.Agents, cfg, names, t.At)
			if err != nil {
				say("%s: %v", store.path, err)
				return cli.ExitError
			}
			if len(ts) > 0 {
				d.kick()
			}
		}
	}
}

// deliveries are the targets' delivery loops.
type deliveries struct {
	wg    sync.WaitGroup
	kicks []chan struct{}
}

// startDeliveries starts a deliverLoop per target, which first delivers
// what a previous run left pending.
func startDeliveries(ctx context.Context, store *pushStore, targets []*pushTarget, say func(string, ...any)) *deliveries {
	d := &deliveries{kicks: make([]chan struct{}, len(targets))}
	for i, target := range targets {
		d.kicks[i] = make(chan struct{}, 1)
		d.kicks[i] <- struct{}{}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			deliverLoop(ctx, store, target, d.kicks[i], say)
		}()
	}
	return d
}

// kick tells every target its queue has grown.
func (d *deliveries) kick() {
	for _, k := range d.kicks {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// deliverLoop delivers the target's queue, oldest first, until ctx ends;
// a failure is tried again after a backoff that doubles up to
// pushMaxBackoff. It says when the target starts failing and when it
// works again, not each attempt.
func deliverLoop(ctx context.Context, store *pushStore, target *pushTarget, kick <-chan struct{}, say func(string, ...any)) {
	backoff := pushMinBackoff
	failing := ""
	for {
		t, created, ok := store.next(target.name)
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				continue
			}
		}
		// The attempt is not cut by ctx: a message half sent is worse
		// than a stop a moment later.
		err := deliver(context.Background(), target, t)
		now := time.Now()
		if err == nil {
			if failing != "" {
				say("%s: delivering again", target)
				failing = ""
			}
			backoff = pushMinBackoff
			if err := store.settle(t.ID, target.name, true, now); err != nil {
				say("%s: %v", store.path, err)
			}
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if msg := err.Error(); msg != failing {
			say("%s: %v (trying again, for up to %v)", target, err, giveUpAfter)
			failing = msg
		}
		if now.Sub(created) > giveUpAfter {
			say("%s: gave up %s of %s after %v", target, t.summary(), fleet.Printable(t.Shown), giveUpAfter)
			if err := store.settle(t.ID, target.name, false, now); err != nil {
				say("%s: %v", store.path, err)
			}
			continue
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, pushMaxBackoff)
	}
}
