//go:build !race

package realcli

const raceEnabled = false
