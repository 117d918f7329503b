//go:build redteam

package redteam

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedteamQueuedCounts: agents whose transcripts are many long message
// ids (what an agent writes in its own project dir), and a grantee that
// reads /active/table again and again. Each read leaves the token sums
// pending and queues their derivation for the daemon's worker, which
// counts every transcript whole and keeps each count's running state (the
// last ids it saw) to read on from: with ids of 16 KiB, 32 transcripts of
// 1,024 lines would keep 512 MiB.
//
// Guards rule 10: what the token counts keep and what is queued for
// later is bounded in bytes and charged to the work shared by all peers.
func TestRedteamQueuedCounts(t *testing.T) {
	requireRoot(t)
	const agents, ids, idLen = 32, 1024, 16 << 10
	w := newWorld(t, ownerUID)
	clean := regexp.MustCompile(`[^a-zA-Z0-9]`)
	pad := strings.Repeat("i", idLen-8)
	var pids []int
	for i := range agents {
		cwd := filepath.Join(w.home, "src", fmt.Sprintf("q%02d", i))
		mkdirOwned(t, cwd, ownerUID)
		sid := fmt.Sprintf("0c0c0c0c-0000-4000-8000-%012d", i)
		proj := filepath.Join(w.home, ".claude", "projects", clean.ReplaceAllString(cwd, "-"))
		mkdirOwned(t, proj, ownerUID)
		tr := filepath.Join(proj, sid+".jsonl")
		f, err := os.Create(tr)
		must(t, err)
		bw := bufio.NewWriterSize(f, 1<<20)
		for j := range ids {
			fmt.Fprintf(bw, `{"type":"assistant","message":{"id":"%s%08d","model":"claude-opus-4-6","content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d,"output_tokens":1}}}`+"\n", pad, j, 1000+j)
		}
		must(t, bw.Flush())
		must(t, f.Close())
		must(t, os.Chown(tr, ownerUID, ownerUID))
		// The fake Claude appends its first lines and registers itself.
		a := startAgent(t, ownerUID, cwd, []string{"HOME=" + w.home, "PATH=/usr/bin:/bin", "FAKE_SESSION=" + sid}, bin("claude"))
		pids = append(pids, a.Process.Pid)
	}
	r := startRig(t, "queued counts", ownerUID, w, granteeArgs()...)
	c := dialSelf(t, r)
	for _, pid := range pids {
		waitAgent(t, r, c, "claude", pid)
	}
	r.note("%d agents, transcripts of %d message ids of %d KiB", agents, ids, idLen>>10)
	stop := r.ownerLists(250 * time.Millisecond)
	var wg sync.WaitGroup
	var errs errCount
	var reads, summed atomic.Int64
	deadline := time.Now().Add(30 * time.Second)
	for range 4 {
		c, err := trySelf(t, r)
		if err != nil {
			errs.add(err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && !r.overCeiling() && summed.Load() < agents {
				b, err := c.ReadFile("/active/table")
				errs.add(err)
				if err != nil {
					continue
				}
				reads.Add(1)
				// The rows whose sums are derived: once every agent's
				// is, the worker has counted them all.
				n := int64(strings.Count(string(b), `input `))
				for {
					old := summed.Load()
					if n <= old || summed.CompareAndSwap(old, n) {
						break
					}
				}
			}
		}()
	}
	waitOrCeiling(r, &wg, 40*time.Second)
	stop()
	dropped := strings.Contains(r.log.String(), "token counts:")
	r.note("%d table reads, %d of %d rows with their sums derived; a drop logged: %v; errors: %v", reads.Load(), summed.Load(), agents, dropped, errs.String())
	r.finish(fmt.Sprintf("4 grantee conns reading /active/table, %d agents with transcripts of long message ids", agents))
}
