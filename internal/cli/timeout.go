package cli

import (
	"fmt"
	"strconv"
	"time"
)

// ParseTimeout reads a Go duration or a number of seconds, as the
// commands' --timeout and --interval take them.
func ParseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != f || f > 1e9 {
			return 0, fmt.Errorf("bad duration %q: want 90s, 5m, 1h30m or seconds", s)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: negative", s)
	}
	return d, nil
}
