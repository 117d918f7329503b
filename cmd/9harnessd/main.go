// Command 9harnessd serves a read-only 9P view (9P2000.L and plain 9P2000)
// of AI coding-agent harness state over a unix socket; the harnesses are
// those of internal/harness. Its command line is package daemonflags, its
// work package daemon: this is flags -> Config -> daemon.Run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/9harness/9harness/internal/daemon"
	"github.com/9harness/9harness/internal/daemonflags"
	"github.com/9harness/9harness/internal/move"
	buildversion "github.com/9harness/9harness/internal/version"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

// Exit statuses, as 9harness's: 0 ok, 1 an error, 2 a usage error.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 3 && args[0] == "--exec-env" {
		// The launcher a move runs in the new session (SOCKET HANDLE): it
		// never returns unless the relaunch cannot be fetched or exec'd.
		err := move.ExecEnv(args[1], args[2])
		fmt.Fprintf(stderr, "9harnessd --exec-env: %v\n", err)
		return 127
	}
	cfg, err := daemonflags.Parse(args, version, log.New(stderr, "", 0).Printf)
	var ue daemonflags.UsageError
	switch {
	case errors.Is(err, daemonflags.ErrHelp):
		io.WriteString(stdout, daemonflags.Help())
		return exitOK
	case errors.Is(err, daemonflags.ErrVersion):
		fmt.Fprintln(stdout, "9harnessd", buildversion.String(version))
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "9harnessd: %v (try '9harnessd --help')\n", ue)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "9harnessd: %v\n", err)
		return exitError
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, *cfg); err != nil {
		fmt.Fprintf(stderr, "9harnessd: %v\n", err)
		return exitError
	}
	return exitOK
}
