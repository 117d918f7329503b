//go:build !race

package test

const raceEnabled = false
