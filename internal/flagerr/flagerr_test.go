package flagerr

import (
	"io"
	"testing"

	"github.com/spf13/pflag"
)

// TestDescribe: each refusal names the flag as it was typed.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag --bogus"},
		{[]string{"-lz"}, "unknown flag -z in -lz"},
		{[]string{"-z"}, "unknown flag -z"},
		{[]string{"--size"}, "flag --size needs a value"},
		{[]string{"-n"}, "flag -n needs a value"},
		{[]string{"--size", "x"}, `invalid value "x" for --size: must be an integer`},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.BoolP("long", "l", false, "")
		fs.IntP("size", "n", 0, "")
		err := fs.Parse(tc.args)
		if err == nil {
			t.Fatalf("%q parsed", tc.args)
		}
		if got := Describe(err, tc.args); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
}
