//go:build redteam

package redteam

import "os"

// helperMode says this run is a helper peer started by an attacker.
func helperMode() bool {
	return os.Getenv("HELPER_FLOOD") != "" || os.Getenv("HELPER_CONFINE") != ""
}
