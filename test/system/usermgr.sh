#!/bin/bash
# A real systemd user manager and journald for one test user, inside a
# private mount namespace, where systemd is not PID 1. Run as root by
# test/usermgr_test.go, inside `unshare --mount --propagation private`.
# Each step below stands in for what PID 1 would have done at boot; the
# comment on it says what fails without it.
# It prints "CHECK key value" lines that the Go test asserts on.
#
# Environment: U (uid), UNAME, UHOME, BINS (test binaries, fakes), SELF (the
# test binary, for writes), WORK (scratch, traversable by U).
set -euo pipefail
: "${U:?}" "${UNAME:?}" "${UHOME:?}" "${BINS:?}" "${WORK:?}" "${SELF:?}"
RUNDIR=/run/user/$U

# /run must be a mount point: a unit with ProtectKernelTunables= (which
# implies MountAPIVFS=) otherwise gets an empty tmpfs on /run, without the
# runtime directory or the journal socket.
mountpoint -q /run || mount --bind /run /run
# /run/systemd/system is what sd_booted() looks for: without it the user
# manager exits ("the system has not been booted with systemd"). unit-root
# and inaccessible/ are what sandboxed units mount from (226/NAMESPACE).
mount -t tmpfs -o mode=755 tmpfs /run/systemd
mkdir -p /run/systemd/system /run/systemd/journal /run/systemd/unit-root /run/systemd/inaccessible
( cd /run/systemd/inaccessible && mkdir -p dir && touch reg && mkfifo fifo && mknod chr c 0 0 && mknod blk b 0 0 &&
  python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")' && chmod 000 dir reg fifo chr blk sock )
mount -t tmpfs -o mode=755 tmpfs /run/log
# /run/credentials: on a booted system the first unit with LoadCredential=
# (systemd-sysctl.service, systemd-tmpfiles-setup.service) makes it; a
# user unit with LoadCredential= and a mount namespace mounts its
# credentials beneath it (226/NAMESPACE without). Made here only if the
# machine lacks it, with a tmpfs over it, and left in place: another
# checkout's run of this test may have its own tmpfs on it, and an rmdir
# here would detach that mount from its namespace.
mkdir -p /run/credentials
mount -t tmpfs -o mode=755 tmpfs /run/credentials
mount -t tmpfs -o mode=755 tmpfs /run/user
mkdir -p "$RUNDIR" && chown "$U:$U" "$RUNDIR" && chmod 700 "$RUNDIR"

/usr/lib/systemd/systemd-journald >"$WORK/journald.log" 2>&1 &
JPID=$!
echo $JPID >"$WORK/journald.pid"
for i in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done

# The manager creates <its cgroup>/init.scope, so it runs in a cgroup
# delegated to the user (the test chowns it); journald derives
# _SYSTEMD_USER_UNIT only from this layout of the path.
CG=user.slice/user-$U.slice/user@$U.service
(
  [ -d /sys/fs/cgroup/systemd/$CG ] && echo $BASHPID > /sys/fs/cgroup/systemd/$CG/cgroup.procs
  [ -d /sys/fs/cgroup/unified/$CG ] && echo $BASHPID > /sys/fs/cgroup/unified/$CG/cgroup.procs
  exec setpriv --reuid="$U" --regid="$U" --init-groups --reset-env \
    env HOME="$UHOME" USER="$UNAME" LOGNAME="$UNAME" PATH=/usr/local/bin:/usr/bin:/bin \
        XDG_RUNTIME_DIR="$RUNDIR" SYSTEMD_LOG_TARGET=journal-or-kmsg /usr/lib/systemd/systemd --user
) >"$WORK/usermgr.log" 2>&1 &
MPID=$!

asuser() {
  setpriv --reuid="$U" --regid="$U" --init-groups --reset-env \
    env HOME="$UHOME" USER="$UNAME" LOGNAME="$UNAME" PATH="$UHOME/.local/bin:$BINS:/usr/local/bin:/usr/bin:/bin" \
        XDG_RUNTIME_DIR="$RUNDIR" DBUS_SESSION_BUS_ADDRESS="unix:path=$RUNDIR/bus" "$@"
}
check() { echo "CHECK $1 $2"; }
AGENTS=()
cleanup() {
  set +e
  exec 7>&- 2>/dev/null
  for p in "${AGENTS[@]}"; do kill "$p" 2>/dev/null; done
  if [ -f "$WORK/record.jsonl" ]; then
    for p in $(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$WORK/record.jsonl"); do kill "$p" 2>/dev/null; done
  fi
  asuser tmux kill-server 2>/dev/null
  asuser zmx kill 'sysmoved*' 2>/dev/null
  asuser systemctl --user exit 2>/dev/null
  for i in $(seq 50); do kill -0 $MPID 2>/dev/null || break; sleep 0.1; done
  kill $MPID 2>/dev/null
  kill $JPID 2>/dev/null
  wait 2>/dev/null
  umount /run/credentials 2>/dev/null
}
trap cleanup EXIT

for i in $(seq 200); do asuser systemctl --user is-active default.target >/dev/null 2>&1 && break; sleep 0.05; done
check manager "$(asuser systemctl --user is-active default.target 2>&1)"

# Install and enable, the way a user does.
asuser systemctl --user daemon-reload
asuser systemctl --user enable --now 9harness.socket
check socket "$(asuser systemctl --user is-active 9harness.socket)"
check service-before "$(asuser systemctl --user is-active 9harness.service || true)"
UD=$UHOME/.config/systemd/user
verify=$(asuser systemd-analyze --user verify "$UD/9harness.socket" "$UD/9harness.service" "$UD/9harness-proc.socket" "$UD/9harness-proc.service" 2>&1) && vrc=0 || vrc=$?
check verify-rc "$vrc"
check verify-output "$(printf "%s" "$verify" | tr "\n" "|")"
score=$(asuser systemd-analyze --user security 9harness.service 2>&1 | sed -n 's/.*Overall exposure level for 9harness.service: \([0-9.]*\).*/\1/p')
check security "${score:-none}"
echo "--- systemd-analyze --user security 9harness.service:"; asuser systemd-analyze --user security 9harness.service 2>&1 | grep -v '✓' || true
hscore=$(asuser systemd-analyze --user security 9harness-proc.service 2>&1 | sed -n 's/.*Overall exposure level for 9harness-proc.service: \([0-9.]*\).*/\1/p')
check security-helper "${hscore:-none}"
echo "--- systemd-analyze --user security 9harness-proc.service:"; asuser systemd-analyze --user security 9harness-proc.service 2>&1 | grep -v '✓' || true

# The first connection activates the daemon.
SOCK=$RUNDIR/9p/harness
check sockmode "$(stat -c %a "$SOCK") $(stat -c %a "$RUNDIR/9p")"
check ls "$(asuser 9harness ls / | tr '\n' ' ')"
# The units run the daemon and the helper with NoNewPrivileges= and a
# seccomp filter: a client is judged against the user manager's, so the
# user's own client gets the owner's view and one under no_new_privs
# (what Landlock needs) only the session state.
check owner-hermes "$(asuser 9harness ls /hermes | tr '\n' ' ')"
check nnp-hermes "$(asuser setpriv --no-new-privs 9harness ls /hermes | tr '\n' ' ')"
check service-after "$(asuser systemctl --user is-active 9harness.service)"
MAIN=$(asuser systemctl --user show -p MainPID --value 9harness.service)
check pid-is-main "$([ "$(asuser 9harness cat /pid)" = "$MAIN" ] && echo yes || echo "no: $MAIN")"
check mirror "$(asuser 9harness cat /codex/session-index | head -c 60)"

# An agent outside the unit shows under /active.
mkdir -p "$UHOME/src/x"; chown "$U:$U" "$UHOME/src" "$UHOME/src/x"
# Started from this shell, outside the daemon's unit; no descriptor of
# this script is left in them (the Go test reads our output from a file,
# but a command substitution here would wait for them).
start_agent() { # name sid
  ( cd "$UHOME/src/x" && asuser env FAKE_SESSION="$2" FAKE_RECORD="$WORK/record.jsonl" MARKER_SECRET="$SECRET" "$1" ) </dev/null >/dev/null 2>&1 &
}
# Every agent's environment holds a secret: after the moves, no journal
# entry, unit property or argv may hold it (rule 7).
SECRET=sk-9harness-marker-$RANDOM$RANDOM$RANDOM
# The checks grep for it from a file: a grep with it in its own argv would
# be the one process that shows it.
printf '%s\n' "$SECRET" >"$WORK/secret"
start_agent claude 3b4c5d6e-7f8a-4b9c-8d0e-1f2a3b4c5d6e
start_agent claude 4c5d6e7f-8a9b-4c0d-9e1f-2a3b4c5d6e7f
for i in $(seq 100); do [ "$(asuser 9harness ls /active/claude 2>/dev/null | wc -l)" = 2 ] && break; sleep 0.1; done
AGENTS+=($(pgrep -u "$U" -x claude))
check active "$(asuser 9harness ls /active/claude | tr '\n' ' ')"
check active-via "$(for p in $(pgrep -u "$U" -x claude); do asuser 9harness cat /active/claude/$p/via; done | sort -u | tr '\n' ' ')"
# The daemon runs in a user namespace (PrivateUsers=yes), where the kernel
# refuses it /proc/<pid>/cwd and environ: these come through the helper.
check userns "$([ "$(readlink /proc/"$(asuser systemctl --user show -p MainPID --value 9harness.service)"/ns/user)" != "$(readlink /proc/self/ns/user)" ] && echo yes || echo no)"
check active-cwd "$(for p in $(pgrep -u "$U" -x claude); do asuser 9harness cat /active/claude/$p/cwd; done | sort -u | tr '\n' ' ')"
check helper "$(asuser systemctl --user is-active 9harness-proc.service)"
# Both in the user's background slice, both Type=exec.
check slice "$(asuser systemctl --user show -p Slice --value 9harness.service) $(asuser systemctl --user show -p Slice --value 9harness-proc.service)"
check type "$(asuser systemctl --user show -p Type --value 9harness.service) $(asuser systemctl --user show -p Type --value 9harness-proc.service)"
# The helper outside any user namespace (else the kernel would refuse it
# the agents' /proc), and unable to create a socket of any family.
HPID=$(asuser systemctl --user show -p MainPID --value 9harness-proc.service)
check helper-userns "$([ "$(readlink /proc/"$HPID"/ns/user)" = "$(readlink /proc/self/ns/user)" ] && echo host || echo own)"
check helper-seccomp "$(sed -n 's/^Seccomp:[[:space:]]*//p' /proc/"$HPID"/status)"
# Another uid (root) is the overflow uid inside the namespace; the helper
# names it, and the daemon refuses it by its real uid.
check root-read "$("$UHOME/.local/bin/9harness" -s "$SOCK" ls / >/dev/null 2>&1 && echo served || echo refused)"
sleep 0.5
check root-named "$(journalctl --no-pager -o cat _SYSTEMD_USER_UNIT=9harness.service 2>/dev/null | grep -c 'refused a connection from uid 0 ' || true)"

# Idle exit, and reactivation; moves switched on in a drop-in.
mkdir -p "$UHOME/.config/systemd/user/9harness.service.d"
# tmux and zmx come from the daemon's configuration, never the agent's
# PATH: the fake zmx lives in $BINS.
printf '[Service]\nEnvironment=HARNESS_IDLE=2s\nEnvironment="HARNESS_ARGS=--allow-move --host-path %s:/usr/bin:/bin"\n' "$BINS" >"$UHOME/.config/systemd/user/9harness.service.d/test.conf"
chown -R "$U:$U" "$UHOME/.config/systemd/user/9harness.service.d"
asuser systemctl --user daemon-reload
asuser systemctl --user stop 9harness.service
asuser 9harness cat /pid >/dev/null
M1=$(asuser systemctl --user show -p MainPID --value 9harness.service)
for i in $(seq 100); do [ "$(asuser systemctl --user is-active 9harness.service || true)" != active ] && break; sleep 0.1; done
check idle-exit "$(asuser systemctl --user is-active 9harness.service || true)"
P2=$(asuser 9harness cat /pid)
M2=$(asuser systemctl --user show -p MainPID --value 9harness.service)
check reactivated "$([ "$P2" = "$M2" ] && [ "$M2" != "$M1" ] && [ "$M2" != 0 ] && echo yes || echo "no: $M1 $M2 $P2")"
check journal-idle "$(journalctl --no-pager -o cat _SYSTEMD_USER_UNIT=9harness.service 2>/dev/null | grep -c 'idle for 2s' || true)"

# 9harness-notify.service, as installed, with its token from a credential
# the unit loads: one webhook message when an agent starts waiting, the
# token in its Authorization header and nowhere else (no argv, no journal).
cat >"$WORK/hook.py" <<'PY'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[1] + "/hook.log", "a") as f:
            f.write(json.dumps({"auth": self.headers.get("Authorization", ""), "body": json.loads(body)}) + "\n")
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + "/hook.port", "w").write(str(s.server_port))
s.serve_forever()
PY
python3 "$WORK/hook.py" "$WORK" </dev/null >/dev/null 2>&1 &
HOOKPID=$!
for i in $(seq 100); do [ -s "$WORK/hook.port" ] && break; sleep 0.05; done
NTOKEN=tk-notify-$RANDOM$RANDOM$RANDOM
mkdir -p "$UHOME/.config/9harness" "$UD/9harness-notify.service.d"
printf '%s\n' "$NTOKEN" >"$UHOME/.config/9harness/hook.token"
chmod 600 "$UHOME/.config/9harness/hook.token"
printf '%s\n' "$NTOKEN" >"$WORK/ntoken"
printf 'on waiting\ntarget webhook url=http://127.0.0.1:%s/hook token-credential=hook\n' "$(cat "$WORK/hook.port")" >"$UHOME/.config/9harness/notify.conf"
printf '[Service]\nLoadCredential=hook:%s/.config/9harness/hook.token\n' "$UHOME" >"$UD/9harness-notify.service.d/test.conf"
chown -R "$U:$U" "$UHOME/.config/9harness" "$UD/9harness-notify.service.d"
nverify=$(asuser systemd-analyze --user verify "$UD/9harness-notify.service" 2>&1) && nvrc=0 || nvrc=$?
check notify-verify "$nvrc $(printf "%s" "$nverify" | grep -v "man 9harness" | tr "\n" "|")"
nscore=$(asuser systemd-analyze --user security 9harness-notify.service 2>&1 | sed -n 's/.*Overall exposure level for 9harness-notify.service: \([0-9.]*\).*/\1/p')
check security-notify "${nscore:-none}"
echo "--- systemd-analyze --user security 9harness-notify.service:"; asuser systemd-analyze --user security 9harness-notify.service 2>&1 | grep -v '✓' || true
asuser systemctl --user daemon-reload
asuser systemctl --user enable --now 9harness-notify.service
for i in $(seq 100); do journalctl --no-pager -o cat _SYSTEMD_USER_UNIT=9harness-notify.service 2>/dev/null | grep -q following && break; sleep 0.1; done
check notify-active "$(asuser systemctl --user is-active 9harness-notify.service)"
NPID=$(asuser systemctl --user show -p MainPID --value 9harness-notify.service)
check notify-userns "$([ "$NPID" != 0 ] && [ "$(readlink /proc/"$NPID"/ns/user)" != "$(readlink /proc/self/ns/user)" ] && echo own || echo "host or none ($NPID)")"
WPID=$(pgrep -u "$U" -x claude | sort -n | head -1)
asuser python3 - "$UHOME/.claude/sessions/$WPID.json" <<'PY'
import json, os, sys, time
p = sys.argv[1]
r = json.load(open(p))
now = int(time.time() * 1000)
r.update(status="waiting", waitingFor="approve Bash", updatedAt=now, statusUpdatedAt=now)
json.dump(r, open(p + ".tmp", "w"))
os.rename(p + ".tmp", p)
PY
for i in $(seq 150); do grep -q "\"pid\": $WPID," "$WORK/hook.log" 2>/dev/null && break; sleep 0.1; done
sleep 2
check notify-hook "$(grep -c "\"pid\": $WPID," "$WORK/hook.log" 2>/dev/null || echo 0) $(grep "\"pid\": $WPID," "$WORK/hook.log" 2>/dev/null | python3 -c 'import json,sys; [print(d["body"]["state"], d["body"]["waiting"], d["auth"] == "Bearer " + open(sys.argv[1]).read().strip()) for d in map(json.loads, sys.stdin)]' "$WORK/ntoken" | tr '\n' ' ')"
check notify-state "$(asuser sh -c 'ls "$HOME"/.config/9harness/notify.state "$HOME"/.local/state/9harness/notify.state 2>/dev/null' | sed "s|$UHOME|~|g" | tr '\n' ' ')"
check notify-token-journal "$(journalctl --no-pager -o export 2>/dev/null | grep -cFf "$WORK/ntoken" || true)"
check notify-token-argv "$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -cFf "$WORK/ntoken" || true)"
echo "--- notify's journal:"; journalctl --no-pager -o cat _SYSTEMD_USER_UNIT=9harness-notify.service 2>/dev/null | tail -n 20
asuser systemctl --user stop 9harness-notify.service
kill $HOOKPID 2>/dev/null || true

# A spy of the user's own uid in a user and mount namespace of its own that
# shares the launch directory (TestHelperSpy, test/handoff_test.go): during
# both moves it watches the directory with inotify, connects to every
# socket there and presents every launcher handle it can read in an argv.
[ -d "$RUNDIR/9harness/launch" ] || asuser mkdir -m 700 "$RUNDIR/9harness/launch"
mkfifo -m 666 "$WORK/spy.in"
( asuser env HELPER_SPY="$RUNDIR/9harness/launch" HELPER_SPY_CANARY_FILE="$WORK/secret" \
    unshare --user --map-root-user --mount --propagation private -- "$SELF" -test.run '^TestHelperSpy$' -test.count=1 \
    <"$WORK/spy.in" >"$WORK/spy.out" 2>&1 ) &
exec 7>"$WORK/spy.in"
for i in $(seq 100); do grep -q watching "$WORK/spy.out" 2>/dev/null && break; sleep 0.1; done
check spy-watching "$(grep -c watching "$WORK/spy.out" || true)"

# Moves, from the socket-activated daemon: one into tmux, one into zmx.
PIDS=($(pgrep -u "$U" -x claude | sort -n))
move() { # pid host name
  asuser env HELPER_WRITE_SOCK="$SOCK" HELPER_WRITE_PATH="/active/claude/$1/$2" HELPER_WRITE_VALUE="$3" "$SELF" -test.run '^TestHelperWrite$' 2>&1 | grep -o 'WRITE.*' || true
}
check move-tmux "$(move "${PIDS[0]}" tmux sysmoved-t)"
check move-zmx "$(move "${PIDS[1]}" zmx sysmoved-z)"
exec 7>&-
for i in $(seq 100); do grep -q '^count leaks' "$WORK/spy.out" 2>/dev/null && break; sleep 0.1; done
echo "--- the spy:"; cat "$WORK/spy.out"
check spy-canary "$(sed -n 's/^count canary //p' "$WORK/spy.out")"
check spy-connects "$(sed -n 's/^count connects //p' "$WORK/spy.out")"
check spy-refused "$(journalctl --no-pager -o cat _SYSTEMD_USER_UNIT=9harness.service 2>/dev/null | grep -c 'refused a launcher.*another user namespace.*(a sandbox)' || true)"
echo "--- the daemon's journal:"; journalctl --no-pager -o cat -t 9harnessd 2>/dev/null | tail -n 20
# From a shell outside the daemon's unit, the user finds both sessions.
check tmux-found "$(asuser tmux has-session -t =sysmoved-t 2>&1 && echo yes || echo no)"
check zmx-found "$(asuser zmx list --short 2>/dev/null | grep -x sysmoved-z || echo no)"
NEW=$(grep -c '"name":"claude"' "$WORK/record.jsonl" || true)
check relaunches "$NEW"
NEWPIDS=$(tail -n 2 "$WORK/record.jsonl" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p' | tr '\n' ' ')
# The moved agents as the daemon sees them: zmx comes from the agent's
# environment, read through the helper.
check moved-zmx "$(for p in $NEWPIDS; do asuser 9harness cat /active/claude/$p/zmx 2>/dev/null; echo; done | sort | tr '\n' ' ')"
check new-cgroups "$(for p in $NEWPIDS; do sed -n 's/^0:://p' /proc/$p/cgroup; done | tr '\n' ' ')"
# Stopping the daemon leaves the moved agents running.
asuser systemctl --user stop 9harness.service
sleep 0.5
check survivors "$(n=0; for p in $NEWPIDS; do kill -0 "$p" 2>/dev/null && n=$((n+1)); done; echo $n)"
check secret-moved "$(n=0; for p in $NEWPIDS; do tr '\0' '\n' </proc/$p/environ | sed -n 's/^MARKER_SECRET=//p' | grep -qxFf "$WORK/secret" && n=$((n+1)); done; echo $n)"
check secret-journal "$(journalctl --no-pager -o export 2>/dev/null | grep -cFf "$WORK/secret" || true)"
check secret-units "$(for u in $(asuser systemctl --user list-units --all --plain --no-legend '9harness-move-*' | awk '{print $1}'); do asuser systemctl --user show "$u"; done | grep -cFf "$WORK/secret" || true)"
check secret-argv "$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -cFf "$WORK/secret" || true)"
# The relaunch went over each move's own socket, which is gone with its
# move; the launchers, in the manager's transient units outside the
# daemon's namespaces, were judged through the helper and given it; the
# only launchers refused were the spy's connections.
check launch-left "$(ls -A "$RUNDIR/9harness/launch" 2>/dev/null | wc -l)"
check launcher-refused-other "$(journalctl --no-pager -o cat _SYSTEMD_USER_UNIT=9harness.service 2>/dev/null | grep 'refused a launcher' | grep -vc 'another user namespace.*(a sandbox)' || true)"
for id in 9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e54 9a3c1d2e5f6b4c7d8e9f0a1b2c3d4e55; do
  journalctl --no-pager -o json MESSAGE_ID=$id >"$WORK/j-$id.json" 2>/dev/null || true
  check journal-$id "$(wc -l <"$WORK/j-$id.json")"
done
# RemoveOnStop=yes: stopping the socket units leaves no socket file.
asuser systemctl --user stop 9harness.socket 9harness-proc.socket
check sock-removed "$([ -e "$SOCK" ] || [ -e "$RUNDIR/9p/harness-proc" ] && echo present || echo removed)"
echo "DONE"
