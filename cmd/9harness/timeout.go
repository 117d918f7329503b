package main

import (
	"time"

	"github.com/9harness/9harness/internal/cli"
)

// parseTimeout is cli.ParseTimeout, by the name ps and top call.
func parseTimeout(s string) (time.Duration, error) { return cli.ParseTimeout(s) }
