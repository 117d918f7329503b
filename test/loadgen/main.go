// Command loadgen is TestLoad's load on a daemon: many concurrent
// clients, each doing a mix of reads, stats, listings and walks of the
// paths it is given, counting every error:
//
//	loadgen -s SOCK -clients N -ops M < PATHS
//
// PATHS has one line per path of the tree, "f /path" for a file and
// "d /path" for a directory. It prints "OPS n ERRORS n ELAPSED d", and
// before it up to ten lines "ERR ..." naming the first errors; it exits 0
// whatever the errors, which the test judges.
//
// It is a program of its own so that the test builds it without the race
// detector whatever the test binary is: under -race the load generator
// costs more CPU than the daemon under test, which stays a race build.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/9harness/9harness/internal/client"
)

func main() {
	sock := flag.String("s", "", "the daemon's socket")
	clients := flag.Int("clients", 256, "concurrent clients")
	ops := flag.Int("ops", 500, "operations per client")
	flag.Parse()
	var files, dirs []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		kind, p, ok := strings.Cut(sc.Text(), " ")
		switch {
		case ok && kind == "f":
			files = append(files, p)
		case ok && kind == "d":
			dirs = append(dirs, p)
		}
	}
	if *sock == "" || len(files) == 0 || len(dirs) == 0 {
		fmt.Fprintln(os.Stderr, "usage: loadgen -s SOCK -clients N -ops M < PATHS (f PATH and d PATH lines)")
		os.Exit(2)
	}

	var nerr, nops atomic.Int64
	var mu sync.Mutex
	var firstErrs []string
	report := func(format string, args ...any) {
		nerr.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if len(firstErrs) < 10 {
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(*sock)
			if err != nil {
				report("client %d: dial: %v", i, err)
				return
			}
			defer c.Close()
			for j := range *ops {
				var err error
				k := i*7919 + j*104729
				switch j % 4 {
				case 0:
					_, err = c.ReadFile(files[k%len(files)])
				case 1:
					_, _, err = c.Stat(files[k%len(files)])
				case 2:
					_, err = c.ReadDir(dirs[k%len(dirs)])
				case 3:
					var f interface{ Close() error }
					f, err = c.Walk(dirs[k%len(dirs)])
					if err == nil {
						err = f.Close()
					}
				}
				nops.Add(1)
				if err != nil {
					report("client %d op %d: %v", i, j, err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, e := range firstErrs {
		fmt.Println("ERR", e)
	}
	fmt.Printf("OPS %d ERRORS %d ELAPSED %s\n", nops.Load(), nerr.Load(), elapsed)
}
