package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/9harness/9harness/internal/fleet"
	"github.com/spf13/pflag"
)

// AddFleetFlags gives fs a fleet command's --all and --hosts FILE, set
// into the flags it returns (whose Timeout is fleet.DefaultTimeout).
func AddFleetFlags(fs *pflag.FlagSet) *fleet.Flags {
	ff := &fleet.Flags{Timeout: fleet.DefaultTimeout}
	fs.BoolVar(&ff.All, "all", false, "")
	fs.StringVar(&ff.Hosts, "hosts", "", "")
	return ff
}

// AddHarnessFlag gives fs --harness NAME, repeatable or a comma separated
// list, each name appended to *names.
func AddHarnessFlag(fs *pflag.FlagSet, names *[]string) {
	fs.Func("harness", "", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				*names = append(*names, h)
			}
		}
		return nil
	})
}

// NoOperands is false, after a usage error on stderr, when a command
// that takes no operand was given one.
func NoOperands(cmd string, operands []string, stderr io.Writer) bool {
	if len(operands) == 0 {
		return true
	}
	fmt.Fprintf(stderr, "9harness %s: unexpected operand %q (try '9harness %s --help')\n", cmd, operands[0], cmd)
	return false
}
