// Package cli is what every command of 9harness shares: the global flags
// (the socket, --ssh) and how they reach the daemon, flag parsing with the
// conventions the help promises, the exit statuses, and writers for
// standard output and error. Each command lives in its own package and
// takes a *Globals; cmd/9harness only picks the command.
package cli
