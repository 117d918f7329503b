package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/9harness/9harness/internal/authz"
)

// System tests: real systemd-journald and a real polkitd on a hand-started
// system bus, each inside a private mount namespace (tmpfs over the paths
// they own), so the host's /run and /usr are never touched and nothing
// outlives the test: the namespace dies with its last process. /etc is
// touched only by TestPolkit's two users, removed when it ends.

// inNamespace runs a bash script in a private mount namespace, as root.
func inNamespace(t *testing.T, script string, env ...string) string {
	t.Helper()
	requireRoot(t)
	require(t, "unshare")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--", "bash", "-euc", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("namespace script: %v\n%s", err, out)
	}
	return string(out)
}

// sharedDir is a temporary directory every uid may traverse.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "9harness-sys-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	return dir
}

// TestJournal: a real systemd-journald receives the daemon's audit entries,
// and journalctl -o json MESSAGE_ID=... returns them with every documented
// field.
func TestJournal(t *testing.T) {
	requireRoot(t)
	if !isExec("/usr/lib/systemd/systemd-journald") {
		missing(t, "systemd-journald (Debian package systemd)")
	}
	work := sharedDir(t)
	home := fixtureHome(t)
	out := inNamespace(t, `
mount -t tmpfs -o mode=755 tmpfs /run/systemd
mkdir -p /run/systemd/journal
mount -t tmpfs -o mode=755 tmpfs /run/log
/usr/lib/systemd/systemd-journald >"$WORK/journald.log" 2>&1 &
JPID=$!
trap 'kill $JPID 2>/dev/null || true; wait $JPID 2>/dev/null || true' EXIT
for i in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
[ -S /run/systemd/journal/socket ]
"$BIN/9harnessd" --unix "$WORK/sock" --audit auto $ROOTS 2>"$WORK/daemon.log" &
DPID=$!
for i in $(seq 200); do [ -S "$WORK/sock" ] && break; sleep 0.05; done
chmod 0666 "$WORK/sock"
setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/9harness" -s "$WORK/sock" cat /pid >/dev/null 2>&1 || true
"$BIN/9harness" -s "$WORK/sock" cat /pid >/dev/null
sleep 0.5
kill $DPID; wait $DPID || true
for i in $(seq 50); do
  journalctl --no-pager -o json MESSAGE_ID=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51 >"$WORK/entries.json" 2>"$WORK/journalctl.err" || true
  [ -s "$WORK/entries.json" ] && break; sleep 0.1
done
cat "$WORK/entries.json"
`, "WORK="+work, "BIN="+bins, "ROOTS="+strings.Join(rootArgs(home), " "))

	var entry map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &entry) == nil {
			break
		}
	}
	if entry == nil {
		daemonLog, _ := os.ReadFile(filepath.Join(work, "daemon.log"))
		t.Fatalf("no journal entry for the refused connection:\n%s\ndaemon:\n%s", out, daemonLog)
	}
	want := map[string]string{
		"MESSAGE_ID":        "9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51",
		"PRIORITY":          "4",
		"SYSLOG_IDENTIFIER": "9harnessd",
		"PEER_UID":          "65534",
		"PEER_GID":          "65534",
		"ACTION":            "read",
		"DECISION":          "deny",
		"_UID":              "0",
		"_TRANSPORT":        "journal",
	}
	for k, v := range want {
		if got, _ := entry[k].(string); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// No PEER_COMM: a uid no grant names is refused on SO_PEERCRED alone,
	// without the /proc read a flood of connects would make it pay for.
	for _, k := range []string{"PEER_PID", "REASON", "MESSAGE"} {
		if got, _ := entry[k].(string); got == "" {
			t.Errorf("%s missing", k)
		}
	}
	if r, _ := entry["REASON"].(string); !strings.Contains(r, "uid 65534 is not the daemon's uid 0") {
		t.Errorf("REASON = %q", r)
	}
	if pid, _ := strconv.Atoi(entry["PEER_PID"].(string)); pid <= 0 {
		t.Errorf("PEER_PID = %v", entry["PEER_PID"])
	}
	t.Logf("journal entry: %s", entry["MESSAGE"])
}

// TestJournalFallback: with no journal reachable, the audit entry is one
// logfmt line on stderr.
func TestJournalFallback(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	if _, err := os.Stat("/run/systemd/journal/socket"); err == nil {
		t.Log("this machine runs a journal: the fallback is checked in a namespace without one")
	}
	work := sharedDir(t)
	home := fixtureHome(t)
	out := inNamespace(t, `
mount -t tmpfs -o mode=755 tmpfs /run/systemd
"$BIN/9harnessd" --unix "$WORK/sock" --audit auto $ROOTS 2>"$WORK/daemon.log" &
DPID=$!
for i in $(seq 200); do [ -S "$WORK/sock" ] && break; sleep 0.05; done
chmod 0666 "$WORK/sock"
setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/9harness" -s "$WORK/sock" cat /pid >/dev/null 2>&1 || true
sleep 0.3
kill $DPID; wait $DPID || true
cat "$WORK/daemon.log"
`, "WORK="+work, "BIN="+bins, "ROOTS="+strings.Join(rootArgs(home), " "))
	if !strings.Contains(out, "audit message_id=9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e51 priority=4 ") || !strings.Contains(out, "peer_uid=65534") {
		t.Fatalf("no fallback line on stderr:\n%s", out)
	}
}

// TestPolkit: a real polkitd on a hand-started system bus answers the
// project's action. A rule that denies a user makes the move refused with
// polkit's reason; a rule that allows lets it pass the gate; with the bus
// gone the move is refused and the reason says polkit could not be asked.
//
// The two users are the machine's own for the test's run: the bus drops a
// client whose uid names no user, and a passwd file bind-mounted over
// /etc/passwd in the namespace is detached by the kernel as soon as any
// process of the machine replaces /etc/passwd (another checkout's useradd).
//
// Guards rule 4: read-only by absence.
func TestPolkit(t *testing.T) {
	requireRoot(t)
	for _, p := range []string{"/usr/lib/polkit-1/polkitd", "/usr/bin/dbus-daemon"} {
		if !isExec(p) {
			missing(t, p+" (Debian packages polkitd, dbus)")
		}
	}
	require(t, "useradd")
	// useradd picks the uids (one of a fixed range would take the uid
	// another checkout's useradd is about to pick).
	var allow, deny *user.User
	for _, u := range []**user.User{&allow, &deny} {
		name := fmt.Sprintf("h9pk%06d", rand.IntN(1_000_000))
		if out, err := userTool("useradd", "-M", "-U", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", name); err != nil {
			t.Fatalf("useradd %s: %v %s", name, err, out)
		}
		t.Cleanup(func() {
			if out, err := userTool("userdel", name); err != nil {
				t.Errorf("userdel %s: %v %s", name, err, out)
			}
		})
		var err error
		*u, err = user.Lookup(name)
		must(t, err)
	}
	work := sharedDir(t)
	policy, err := filepath.Abs("../packaging/polkit/org.ninep.harness.move.policy")
	must(t, err)
	out := inNamespace(t, `
mount -t tmpfs -o mode=755 tmpfs /run/dbus
mount -t tmpfs -o mode=755 tmpfs /usr/share/polkit-1/actions
cp "$POLICY" /usr/share/polkit-1/actions/
mkdir -p /etc/polkit-1/rules.d
mount -t tmpfs -o mode=755 tmpfs /etc/polkit-1/rules.d
cat >/etc/polkit-1/rules.d/50-9harness-test.rules <<JS
polkit.addRule(function(action, subject) {
    if (action.id == "org.ninep.harness.move" && subject.user == "$ALLOWNAME") return polkit.Result.YES;
    if (action.id == "org.ninep.harness.move" && subject.user == "$DENYNAME") return polkit.Result.NO;
});
JS
# Its log on standard error (there is no syslog here), for the output.
dbus-daemon --system --nofork --nosyslog 2>"$WORK/dbus.log" &
DBUS=$!
for i in $(seq 100); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.1; done
/usr/lib/polkit-1/polkitd >"$WORK/polkitd.log" 2>&1 &
PPID2=$!
trap 'kill $PPID2 $DBUS 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for i in $(seq 100); do pkaction --action-id org.ninep.harness.move >/dev/null 2>&1 && break; sleep 0.1; done
pkaction --action-id org.ninep.harness.move
for u in $ALLOW $DENY; do
  echo "AS $u: $(setpriv --reuid=$u --regid=$u --clear-groups env HELPER_POLKIT=system "$BIN/self.test" -test.run '^TestHelperPolkit$' 2>&1 | grep DECISION)"
done
echo "AS $ALLOW without bus: $(setpriv --reuid=$ALLOW --regid=$ALLOW --clear-groups env HELPER_POLKIT=unix:path=/nonexistent/bus "$BIN/self.test" -test.run '^TestHelperPolkit$' 2>&1 | grep DECISION)"
echo "--- dbus-daemon's log:"; cat "$WORK/dbus.log"
`, "WORK="+work, "BIN="+bins, "POLICY="+policy, "ALLOW="+allow.Uid, "DENY="+deny.Uid, "ALLOWNAME="+allow.Username, "DENYNAME="+deny.Username)
	for _, want := range []string{
		"AS " + allow.Uid + ": DECISION allow: uid " + allow.Uid + " is the daemon's own uid, --allow-move is set and polkit authorized org.ninep.harness.move",
		"AS " + deny.Uid + ": DECISION deny: polkit denied org.ninep.harness.move: not authorized for uid " + deny.Uid,
		"AS " + allow.Uid + " without bus: DECISION deny: polkit could not be asked, so the move is refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// TestHelperPolkit runs as a test user inside TestPolkit's namespace: it is
// a peer asking to move, decided by the daemon's policy with a real polkit
// checker on its own pid and start time.
func TestHelperPolkit(t *testing.T) {
	bus := os.Getenv("HELPER_POLKIT")
	if bus == "" {
		return
	}
	if bus == "system" {
		bus = ""
	}
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	start, _ := strconv.ParseUint(f[19], 10, 64)
	uid := uint32(os.Getuid())
	p := authz.Policy{Owner: uid, AllowMove: true, Polkit: &authz.Polkit{Bus: bus}}
	d := p.Decide(context.Background(), authz.Subject{UID: uid, GID: uint32(os.Getgid()), PID: int32(os.Getpid()), StartTime: start}, authz.Move)
	verdict := "deny"
	if d.Allow {
		verdict = "allow"
	}
	println("DECISION " + verdict + ": " + d.Reason)
}
