// Package flagerr says what is wrong with a command line that pflag
// refused, in the words of the flag as it was typed, for both commands.
package flagerr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Describe says what is wrong with a flag, naming it as it was typed in
// args: an unknown letter inside a group of short flags is named with the
// group (`unknown flag -z in -lz`).
func Describe(err error, args []string) string {
	var ne *pflag.NotExistError
	var ve *pflag.ValueRequiredError
	var ie *pflag.InvalidValueError
	switch {
	case errors.As(err, &ne):
		if group := ne.GetSpecifiedShortnames(); group != "" {
			// pflag gives the letters from the unknown one on; the word
			// typed is the argument that ends with them.
			for _, a := range args {
				if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.HasSuffix(a, group) {
					return fmt.Sprintf("unknown flag -%c in %s", group[0], a)
				}
			}
			return fmt.Sprintf("unknown flag -%c", group[0])
		}
		return "unknown flag --" + ne.GetSpecifiedName()
	case errors.As(err, &ve):
		if group := ve.GetSpecifiedShortnames(); group != "" {
			return fmt.Sprintf("flag -%c needs a value", ve.GetSpecifiedName()[0])
		}
		return "flag --" + ve.GetSpecifiedName() + " needs a value"
	case errors.As(err, &ie):
		return fmt.Sprintf("invalid value %q for --%s: %v", ie.GetValue(), ie.GetFlag().Name, ie.Unwrap())
	}
	return err.Error()
}
