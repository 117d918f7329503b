package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/9harness/9harness/internal/flagerr"
	"github.com/spf13/pflag"
)

// ParseFlags parses a command's flags. With interspersed, flags may follow
// operands too (up to "--"). It returns the operands, or ok false with the
// exit status: 0 after printing help to stdout for -h/--help, 2 after one
// line on stderr for a bad flag.
func (g *Globals) ParseFlags(fs *pflag.FlagSet, args []string, interspersed bool, stdout, stderr io.Writer) (operands []string, status int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SetInterspersed(interspersed)
	args, herr := groupedH(fs, args)
	if herr != nil {
		fmt.Fprintf(stderr, "9harness %s: %v (try '9harness %s --help')\n", fs.Name(), herr, fs.Name())
		return nil, ExitUsage, false
	}
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		io.WriteString(stdout, g.Helps[fs.Name()])
		return nil, ExitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "9harness %s: %s (try '9harness %s --help')\n", fs.Name(), flagerr.Describe(err, args), fs.Name())
		return nil, ExitUsage, false
	}
	if fs.Changed("version") {
		fmt.Fprintln(stdout, "9harness", g.Version)
		return nil, ExitOK, false
	}
	return fs.Args(), ExitOK, true
}

// groupedH gives -h inside a group of short flags (ls -lh) the meaning its
// namesakes give it: a command with --human-readable takes it for that
// (GNU ls -lh), any other refuses it. pflag would print the help and exit
// 0, so a script's typo would pass for success. A lone -h stays help.
func groupedH(fs *pflag.FlagSet, args []string) ([]string, error) {
	if fs.ShorthandLookup("h") != nil {
		return args, nil
	}
	human := fs.Lookup("human-readable")
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		if strings.HasPrefix(a, "--") {
			// A long flag's value may be the next argument.
			if f := fs.Lookup(strings.TrimPrefix(a, "--")); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
				out = append(out, a, args[i+1])
				i++
				continue
			}
			out = append(out, a)
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			out = append(out, a)
			continue
		}
		group, valueNext := []byte{'-'}, false
		for j := 1; j < len(a); j++ {
			c := a[j]
			if c == 'h' && len(a) > 2 {
				if human == nil {
					return nil, fmt.Errorf("-h in %s: -h means help only on its own", a)
				}
				out = append(out, "--human-readable")
				continue
			}
			group = append(group, c)
			f := fs.ShorthandLookup(string(c))
			if f == nil || f.NoOptDefVal == "" {
				// Unknown (pflag says so), or it takes the rest as its value.
				group = append(group, a[j+1:]...)
				valueNext = f != nil && j == len(a)-1
				break
			}
		}
		if len(group) > 1 {
			out = append(out, string(group))
		}
		if valueNext && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return out, nil
}
