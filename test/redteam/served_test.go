//go:build redteam

package redteam

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/client"
)

// The attackers of what a root serves whole (rule 2): copies of project
// files the harnesses keep must be absent, and a project named like a
// credential must not be. Both read the tree as the owner (this process,
// on a daemon of uid 0) and as a grantee (another uid, the same code run
// by the helper binary), by listing (a walk of the whole tree, every file
// read) and by walk (each planted path asked for by name).

// probe lists the whole tree of c, reads every file, and walks to each
// of paths; it writes a line per path served ("LISTED p", "WALKED p")
// and per file holding canary, raw or zlib-inflated ("CANARY p n").
func probe(w io.Writer, c *client.Client, canary []byte, paths []string) {
	check := func(p string) {
		b, err := c.ReadFile(p)
		if err != nil {
			return
		}
		n := bytes.Count(b, canary)
		if z, err := zlib.NewReader(bytes.NewReader(b)); err == nil {
			d, _ := io.ReadAll(io.LimitReader(z, 16<<20))
			n += bytes.Count(d, canary)
		}
		if n > 0 {
			fmt.Fprintf(w, "CANARY %s %d\n", p, n)
		}
	}
	var list func(dir string)
	list = func(dir string) {
		ents, err := c.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := strings.TrimSuffix(dir, "/") + "/" + e.Name
			fmt.Fprintf(w, "LISTED %s\n", p)
			if e.QID.IsDir() {
				list(p)
			} else {
				check(p)
			}
		}
	}
	list("/")
	for _, p := range paths {
		if _, _, err := c.Stat(p); err == nil {
			fmt.Fprintf(w, "WALKED %s\n", p)
			check(p)
		}
	}
}

// TestHelperProbe, run as a grantee: probe of HELPER_PROBE (the socket).
func TestHelperProbe(t *testing.T) {
	sock := os.Getenv("HELPER_PROBE")
	if sock == "" {
		return
	}
	c, err := client.Dial(sock)
	if err != nil {
		fmt.Println("DIAL-ERR", err)
		return
	}
	defer c.Close()
	probe(os.Stdout, c, []byte(os.Getenv("HELPER_PROBE_CANARY")), strings.Split(os.Getenv("HELPER_PROBE_PATHS"), "\n"))
}

// probeAll runs probe as the owner and as the grantee friendUID and
// returns what each got, by who.
func probeAll(t *testing.T, r *rig, canary string, paths []string) map[string]string {
	t.Helper()
	var own bytes.Buffer
	probe(&own, dialSelf(t, r), []byte(canary), paths)
	cmd := helper("TestHelperProbe", nil, "HELPER_PROBE="+r.sock, "HELPER_PROBE_CANARY="+canary, "HELPER_PROBE_PATHS="+strings.Join(paths, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: friendUID, Gid: friendUID}}
	out, err := cmd.CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("DIAL-ERR")) || !bytes.Contains(out, []byte("LISTED /active")) {
		t.Fatalf("the grantee's probe: %v\n%s", err, out)
	}
	return map[string]string{"owner": own.String(), "grantee": string(out)}
}

// has reports whether the probe's output holds the line kind+" "+p.
func has(out, kind, p string) bool {
	return strings.Contains("\n"+out, "\n"+kind+" "+p+"\n")
}

// TestRedteamCopyStores: hermes's checkpoint store (a shadow git store of
// a working directory: its deploy.key as a zlib object named by its hash),
// also under a profile, and Claude's file-history (copies of edited
// files). Before the fix the owner's /hermes served the store, and the
// key was read back by its object's hash. Absent for the owner and a
// grantee, by listing and by walk: no byte of the canary reaches either.
//
// Guards rule 2: no credential is listed or read, not even as a copy.
func TestRedteamCopyStores(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, 0)
	canary := "redteam-deploy-key-" + strconv.Itoa(os.Getpid())
	key := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n" + canary + "\n-----END OPENSSH PRIVATE KEY-----\n")
	obj := append([]byte(fmt.Sprintf("blob %d\x00", len(key))), key...)
	sum := sha1.Sum(obj)
	hash := hex.EncodeToString(sum[:])
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(obj)
	zw.Close()
	files := map[string][]byte{
		".hermes/checkpoints/0123456789abcdef/objects/" + hash[:2] + "/" + hash[2:]:               z.Bytes(),
		".hermes/checkpoints/0123456789abcdef/HERMES_WORKDIR":                                     []byte(w.home + "/src/x\n"),
		".hermes/profiles/work/checkpoints/fedcba9876543210/objects/" + hash[:2] + "/" + hash[2:]: z.Bytes(),
		".claude/file-history/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/3f2a1b0c9d8e7f6a@v1":           key,
	}
	var paths []string
	for f, b := range files {
		must(t, os.MkdirAll(filepath.Join(w.home, filepath.Dir(f)), 0o755))
		must(t, os.WriteFile(filepath.Join(w.home, f), b, 0o644))
		paths = append(paths, "/"+strings.TrimPrefix(f, "."))
	}
	paths = append(paths, "/hermes/checkpoints", "/hermes/profiles/work/checkpoints", "/claude/file-history")
	must(t, exec.Command("chmod", "-R", "a+rX", w.home).Run())
	r := startRig(t, "copies of project files", 0, w, "--allow-uid", strconv.Itoa(friendUID))
	stop := r.ownerLists(time.Second)
	got := probeAll(t, r, canary, paths)
	stop()
	var notes []string
	for _, who := range []string{"owner", "grantee"} {
		out := got[who]
		if !has(out, "LISTED", "/hermes/sessions") {
			t.Fatalf("the %s does not list /hermes/sessions beside the store: the check would prove nothing", who)
		}
		listed, walked := 0, 0
		for _, p := range paths {
			if has(out, "LISTED", p) {
				listed++
			}
			if has(out, "WALKED", p) {
				walked++
			}
		}
		leaks := strings.Count(out, "CANARY ")
		notes = append(notes, fmt.Sprintf("to the %s %d of %d listed, %d walked, %d files with the canary", who, listed, len(paths), walked, leaks))
		if listed+walked+leaks > 0 {
			t.Errorf("the %s got the copy stores (%d listed, %d walked, %d files with the canary):\n%s", who, listed, walked, leaks, grepLines(out, "checkpoints", "file-history", "CANARY"))
		}
	}
	r.note("%s", strings.Join(notes, "; "))
	r.finish("hermes checkpoints (a deploy.key as a zlib object) and Claude's file-history, listed and walked by the owner and a grantee")
}

// grepLines is the lines of s holding any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// slugs are projects named like a credential rule's prefix, suffix or
// shape.
var slugs = []string{"kubeconfig-gen", "id_rsa-parser", ".envoy-config", "certs.pem", "oauth-server", "secret-santa"}

// TestRedteamSlugsServed: the other way a bound widens too far. A Gemini
// tmp directory and a Claude project directory per slug, each with a
// transcript. Before the fix Gemini's kubeconfig-gen, id_rsa-parser,
// .envoy-config and certs.pem were hidden with their transcripts. Each
// transcript is listed and read, by the owner and by a grantee.
//
// Guards rule 2: a directory named after a working directory is never
// hidden for its name.
func TestRedteamSlugsServed(t *testing.T) {
	requireRoot(t)
	w := newWorld(t, 0)
	mark := "redteam-transcript-" + strconv.Itoa(os.Getpid())
	var paths []string
	for _, s := range slugs {
		for _, f := range []string{
			".gemini/tmp/" + s + "/chats/session-2026-12-06T07-00-0a1b2c3d.json",
			".claude/projects/-root-src-" + s + "/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.jsonl",
		} {
			must(t, os.MkdirAll(filepath.Join(w.home, filepath.Dir(f)), 0o755))
			must(t, os.WriteFile(filepath.Join(w.home, f), []byte(`{"transcript":"`+mark+`"}`+"\n"), 0o644))
			paths = append(paths, "/"+strings.TrimPrefix(f, "."))
		}
	}
	must(t, exec.Command("chmod", "-R", "a+rX", w.home).Run())
	r := startRig(t, "slugs served", 0, w, "--allow-uid", strconv.Itoa(friendUID))
	stop := r.ownerLists(time.Second)
	got := probeAll(t, r, mark, paths)
	stop()
	var notes []string
	for _, who := range []string{"owner", "grantee"} {
		out := got[who]
		var hidden []string
		for _, p := range paths {
			if !has(out, "LISTED", p) || !has(out, "WALKED", p) || !has(out, "CANARY", p+" 1") {
				hidden = append(hidden, p)
			}
		}
		notes = append(notes, fmt.Sprintf("to the %s %d of %d transcripts listed, walked and read", who, len(paths)-len(hidden), len(paths)))
		if len(hidden) > 0 {
			t.Errorf("the %s is not served: %s", who, strings.Join(hidden, " "))
		}
	}
	r.note("%s", strings.Join(notes, "; "))
	r.finish(fmt.Sprintf("%d credential-like slugs as Gemini tmp and Claude project directories, a transcript in each, listed, walked and read by the owner and a grantee", len(slugs)))
}
