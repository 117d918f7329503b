package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/9harness/9harness/internal/harness"
)

// ---------------------------------------------------------------- fleet

// The fleet section: `9harness ps` over fleetHosts loopback hosts of
// fleetAgents agents each, against the sum of the hosts' single listings.
const (
	fleetHosts  = 10
	fleetAgents = 50
	// fleetTranscript is each agent's transcript: small, since the row
	// measures the fan-out over ssh, not a transcript's reading (the ps
	// section does that).
	fleetTranscript = 64 << 10
	fleetTarget     = 0.6
)

// fleetRun is the fleet section's result.
type fleetRun struct {
	fleet, sum *cell
	relay      *cell             // the fleet with --ssh-forward=no: every host through its relay
	forwards   int               // live forwards in the masters' directory once warm
	singles    [fleetHosts]*cell // each host's own listing, for the report
	warm       float64           // the first ps over the fleet (ssh masters made), in ms
}

// fleetUser is one loopback host: a user with its own daemon and agents.
type fleetUser struct {
	name     string
	uid, gid int
	home     string
	sock     string
	daemon   *exec.Cmd
	done     chan error
	sleepers []*exec.Cmd
}

// fleetSection sets up one sshd on 127.0.0.1 and fleetHosts users, each
// with its own 9harnessd and fleetAgents sleepers named claude (with their
// registry records and transcripts), warms one ssh ControlMaster per host,
// checks that a fleet listing holds every agent, and then measures, in
// interleaved rounds, `9harness ps --hosts FILE` over the ten hosts
// against the ten `9harness --ssh HOST ps` run one after another (their
// total), through the same warm masters. Everything it made (users,
// processes, files) is removed at exit.
func fleetSection(e *env) *fleetRun {
	sshd, keygen := sbin("sshd"), sbin("ssh-keygen")
	useradd, userdel := sbin("useradd"), sbin("userdel")
	if _, err := exec.LookPath("ssh"); err != nil {
		fatalf("fleet: ssh is not installed (Debian package openssh-client)")
	}
	// Short: the ControlPath sockets live here.
	base, err := os.MkdirTemp("/tmp", "9hb-")
	if err != nil {
		fatalf("%v", err)
	}
	atExit(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		fatalf("%v", err)
	}
	if _, err := os.Stat("/run/sshd"); os.IsNotExist(err) {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			fatalf("%v", err)
		}
		atExit(func() { os.Remove("/run/sshd") })
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fatalf("sleep: %v", err)
	}
	sleepBytes, err := os.ReadFile(sleep)
	if err != nil {
		fatalf("%v", err)
	}
	claude := filepath.Join(base, "claude")
	if err := os.WriteFile(claude, sleepBytes, 0o755); err != nil {
		fatalf("%v", err)
	}
	body := psScaleBody()[:fleetTranscript]

	users := make([]*fleetUser, fleetHosts)
	tag := strconv.Itoa(os.Getpid() % 10000)
	for i := range users {
		u := &fleetUser{name: fmt.Sprintf("h9bench%02d%s", i, tag)}
		u.home = filepath.Join(base, u.name)
		out, err := exec.Command(useradd, "-M", "-d", u.home, "-s", "/bin/sh", "-p", "*", "-U", u.name).CombinedOutput()
		if err != nil {
			fatalf("useradd %s: %v\n%s", u.name, err, out)
		}
		atExit(func() { removeFleetUser(u, userdel) })
		pw, err := user.Lookup(u.name)
		if err != nil {
			fatalf("%v", err)
		}
		u.uid, _ = strconv.Atoi(pw.Uid)
		u.gid, _ = strconv.Atoi(pw.Gid)
		users[i] = u
		fleetAgentsUp(u, claude, body, e.ours)
		atExit(func() { stopFleetUser(u) })
	}
	fmt.Printf("fleet: %d users with %d agents each under %s\n", fleetHosts, fleetAgents, base)

	// One sshd for them all, one key for them all.
	keys := filepath.Join(base, "ssh")
	os.Mkdir(keys, 0o755)
	hostKey, key := filepath.Join(keys, "host"), filepath.Join(keys, "id")
	for _, k := range []string{hostKey, key} {
		if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		fatalf("%v", err)
	}
	authorized := filepath.Join(keys, "authorized_keys")
	os.WriteFile(authorized, pub, 0o644)
	var names []string
	for _, u := range users {
		names = append(names, u.name)
	}
	port := freePort()
	conf := filepath.Join(keys, "sshd_config")
	os.WriteFile(conf, []byte(strings.Join([]string{
		"Port " + strconv.Itoa(port), "ListenAddress 127.0.0.1", "HostKey " + hostKey,
		"PidFile " + filepath.Join(keys, "sshd.pid"), "AuthorizedKeysFile " + authorized,
		"UsePAM no", "StrictModes no", "PubkeyAuthentication yes", "PasswordAuthentication no",
		"KbdInteractiveAuthentication no", "PermitRootLogin no", "AllowUsers " + strings.Join(names, " "),
		"X11Forwarding no", "PrintMotd no", "PrintLastLog no", "MaxStartups 100", "MaxSessions 100",
		"LogLevel ERROR",
	}, "\n")+"\n"), 0o644)
	sshdCmd := exec.Command(sshd, "-D", "-e", "-f", conf)
	sshdLog := &strings.Builder{}
	sshdCmd.Stderr = sshdLog
	if err := sshdCmd.Start(); err != nil {
		fatalf("sshd: %v", err)
	}
	sshdDone := make(chan error, 1)
	go func() { sshdDone <- sshdCmd.Wait() }()
	atExit(func() {
		sshdCmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-sshdDone:
		case <-time.After(5 * time.Second):
			sshdCmd.Process.Kill()
			<-sshdDone
		}
	})

	// The hosts file, and each host's single-listing command line: the
	// same ssh options, so the same master.
	cm := filepath.Join(base, "cm")
	os.Mkdir(cm, 0o700)
	opts := []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "GlobalKnownHostsFile=/dev/null",
		"LogLevel=ERROR", "IdentitiesOnly=yes", "IdentityFile=" + key,
		"ControlMaster=auto", "ControlPath=" + cm + "/%r", "ControlPersist=900"}
	relay := e.client + " relay"
	var lines []string
	run := &fleetRun{}
	var singles [fleetHosts][]string
	for i, u := range users {
		line := fmt.Sprintf("%s@127.0.0.1:%d ssh-cmd='%s' socket=%s", u.name, port, relay, u.sock)
		single := []string{"-s", u.sock, "--ssh", u.name + "@127.0.0.1", "--ssh-cmd", relay, "--ssh-opt", "Port=" + strconv.Itoa(port)}
		for _, o := range opts {
			line += " ssh-opt=" + o
			single = append(single, "--ssh-opt", o)
		}
		lines = append(lines, line)
		singles[i] = append(single, "ps")
	}
	atExit(func() {
		for _, u := range users {
			exec.Command("ssh", "-o", "ControlPath="+cm+"/%r", "-O", "exit", "-p", strconv.Itoa(port), u.name+"@127.0.0.1").Run()
		}
	})
	hostsFile := filepath.Join(base, "hosts")
	os.WriteFile(hostsFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	fleetArgs := []string{"ps", "--hosts", hostsFile, "--timeout", "30s"}

	// Warm: the first listing makes every master; then it must hold every
	// agent of every host (sshd may take a moment to listen).
	deadline := time.Now().Add(20 * time.Second)
	for {
		t0 := time.Now()
		out, err := exec.Command(e.client, append(fleetArgs, "--json")...).Output()
		run.warm = time.Since(t0).Seconds() * 1000
		var rows []map[string]any
		if err == nil && json.Unmarshal(out, &rows) == nil {
			per := map[string]int{}
			for _, r := range rows {
				if s, _ := r["session"].(string); s != "" {
					per[fmt.Sprint(r["host"])]++
				}
			}
			ok := len(per) == fleetHosts
			for _, n := range per {
				ok = ok && n == fleetAgents
			}
			if ok {
				break
			}
			err = fmt.Errorf("%d hosts answered: %v", len(per), per)
		}
		if time.Now().After(deadline) {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			fatalf("fleet: ps --hosts never listed %d agents on each of %d hosts: %v\n%s\nsshd: %s", fleetAgents, fleetHosts, err, stderr, sshdLog.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	fmt.Printf("fleet: first listing (masters made): %.0f ms\n", run.warm)

	once := func(args []string) (float64, error) {
		t0 := time.Now()
		cmd := exec.Command(e.client, args...)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = e.null, &stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("9harness %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return time.Since(t0).Seconds() * 1000, nil
	}
	// Each single listing once, so that every host's forward is made for
	// its command line too (the first call of one goes through the relay).
	for _, s := range singles {
		if _, err := once(s); err != nil {
			fatalf("fleet: warming the single listings: %v", err)
		}
	}
	socks, _ := filepath.Glob(filepath.Join(cm, "*.9p-*"))
	for _, s := range socks {
		if c, err := net.Dial("unix", s); err == nil {
			c.Close()
			run.forwards++
		}
	}
	fmt.Printf("fleet: %d live forwards beside the masters\n", run.forwards)

	for i := range run.singles {
		run.singles[i] = &cell{section: "fleet", key: fmt.Sprintf("fleet-single%d", i), unit: "ms",
			name: fmt.Sprintf("9harness --ssh host%d ps", i)}
	}
	run.sum = &cell{section: "fleet", key: "fleet-sum", unit: "ms",
		name: fmt.Sprintf("the %d single-host listings, one after another (sum)", fleetHosts),
		measure: func() (float64, error) {
			total := 0.0
			for i, s := range singles {
				v, err := once(s)
				if err != nil {
					return 0, err
				}
				run.singles[i].samples = append(run.singles[i].samples, v)
				total += v
			}
			return total, nil
		}}
	run.fleet = &cell{section: "fleet", key: "fleet", unit: "ms", anchor: "fleet-sum",
		name:    fmt.Sprintf("9harness ps over %d hosts × %d agents", fleetHosts, fleetAgents),
		measure: func() (float64, error) { return once(fleetArgs) }}
	run.relay = &cell{section: "fleet", key: "fleet-relay", unit: "ms", anchor: "fleet-sum",
		name:    "the same with --ssh-forward=no (every host through ssh and its relay)",
		measure: func() (float64, error) { return once(append(slices.Clone(fleetArgs), "--ssh-forward=no")) }}
	n := max(*rounds, 5)
	for r := range n {
		for _, c := range []*cell{run.sum, run.fleet, run.relay} {
			v, err := c.measure()
			if err != nil {
				fatalf("round %d, %s: %v", r+1, c.name, err)
			}
			c.samples = append(c.samples, v)
			printSample(r, c, v)
		}
	}
	return run
}

// sbin finds a system program the fleet section needs.
func sbin(name string) string {
	if p := lookSbin(name); p != "" {
		return p
	}
	fatalf("fleet: %s is not installed (Debian packages openssh-server, passwd)", name)
	return ""
}

// lookSbin finds a program on PATH or in the sbin directories: "" when
// there is none.
func lookSbin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fleetAgentsUp gives u a home with fleetAgents sleepers named claude
// running as u, each with its registry record and a transcript, and
// starts u's daemon on them.
func fleetAgentsUp(u *fleetUser, claude string, body []byte, daemon string) {
	croot := harness.DefaultRoot("claude", u.home, "")
	run := filepath.Join(u.home, "run")
	for _, d := range []string{filepath.Join(croot, "sessions"), run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			fatalf("%v", err)
		}
	}
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	cwd := func(i int) string { return filepath.Join(u.home, "w", strconv.Itoa(i)) }
	for i := range fleetAgents {
		if err := os.MkdirAll(cwd(i), 0o755); err != nil {
			fatalf("%v", err)
		}
	}
	chownAll(u.home, u) // the sleepers start in their directories as u
	now := time.Now()
	for i := range fleetAgents {
		cwd := cwd(i)
		cmd := exec.Command(claude, "900")
		cmd.Dir, cmd.Env = cwd, []string{"PATH=/usr/bin:/bin", "HOME=" + u.home, "LANG=C.UTF-8"}
		cmd.SysProcAttr = cred
		if err := cmd.Start(); err != nil {
			fatalf("start sleeper as %s: %v", u.name, err)
		}
		u.sleepers = append(u.sleepers, cmd)
		pid := cmd.Process.Pid
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			fatalf("%v", err)
		}
		_, rest, _ := strings.Cut(string(st), ") ")
		started := strings.Fields(rest)[19]
		sid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, pid)
		rec := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":%q,"startedAt":%d,"procStart":%q,"status":"busy","kind":"interactive"}`,
			pid, sid, cwd, now.Add(-time.Hour).UnixMilli(), started)
		os.WriteFile(filepath.Join(croot, "sessions", strconv.Itoa(pid)+".json"), []byte(rec), 0o600)
		proj := filepath.Join(croot, "projects", psSanitize(cwd))
		os.MkdirAll(proj, 0o700)
		tr := filepath.Join(proj, sid+".jsonl")
		os.WriteFile(tr, body, 0o600)
		mt := now.Add(-30*time.Minute + time.Duration(i)*time.Second)
		os.Chtimes(tr, mt, mt)
	}
	chownAll(u.home, u)
	if err := os.Chmod(u.home, 0o700); err != nil {
		fatalf("%v", err)
	}

	u.sock = filepath.Join(run, "harness.sock")
	args := []string{"--unix", u.sock, "--quiet"}
	for _, h := range harness.Names() {
		args = append(args, "--root", h+"="+harness.DefaultRoot(h, u.home, ""))
	}
	u.daemon = exec.Command(daemon, args...)
	u.daemon.Env = []string{"HOME=" + u.home, "XDG_RUNTIME_DIR=" + run, "PATH=/usr/bin:/bin", "USER=" + u.name}
	u.daemon.Dir = u.home
	u.daemon.SysProcAttr = cred
	var log strings.Builder
	u.daemon.Stdout, u.daemon.Stderr = &log, &log
	if err := u.daemon.Start(); err != nil {
		fatalf("9harnessd as %s: %v", u.name, err)
	}
	u.done = make(chan error, 1)
	go func() { u.done <- u.daemon.Wait() }()
	// Ready when its socket is there (a probe from root would be a
	// refused peer).
	deadline := time.Now().Add(15 * time.Second)
	for {
		if fi, err := os.Stat(u.sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		select {
		case err := <-u.done:
			u.done <- err
			fatalf("9harnessd as %s exited: %v\n%s", u.name, err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			fatalf("9harnessd as %s did not listen on %s", u.name, u.sock)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// chownAll gives dir and everything beneath it to u.
func chownAll(dir string, u *fleetUser) {
	if u.uid == 0 || !strings.HasPrefix(dir, "/tmp/9hb-") {
		fatalf("fleet: refusing to chown %s to uid %d", dir, u.uid)
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, u.uid, u.gid)
		}
		return nil
	})
}

// stopFleetUser stops u's daemon and sleepers, which this section started.
func stopFleetUser(u *fleetUser) {
	for _, c := range u.sleepers {
		c.Process.Kill()
		c.Wait()
	}
	if u.daemon != nil && u.daemon.Process != nil {
		u.daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-u.done:
		case <-time.After(5 * time.Second):
			u.daemon.Process.Kill()
			<-u.done
		}
	}
}

// removeFleetUser deletes u once nothing runs as it (what still does, the
// ssh sessions of its masters, is this section's own, and is killed).
func removeFleetUser(u *fleetUser, userdel string) {
	for try := 0; try < 50; try++ {
		pids := uidProcs(u.uid)
		if len(pids) == 0 {
			break
		}
		if try >= 20 {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.HasPrefix(u.name, "h9bench") {
		return
	}
	if out, err := exec.Command(userdel, "-r", u.name).CombinedOutput(); err != nil && !strings.Contains(string(out), "not found") {
		fmt.Fprintf(os.Stderr, "bench: userdel %s: %v %s\n", u.name, err, out)
	}
}

// uidProcs lists the pids whose real uid is uid.
func uidProcs(uid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				if f[1] == strconv.Itoa(uid) {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}

func fleetReport(a *fleetRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	fl, sum := summarize(a.fleet.samples), summarize(a.sum.samples)
	p("## 9harness ps over a fleet\n\n")
	p("`9harness ps --hosts FILE` over %d loopback hosts (one sshd on 127.0.0.1, %d users, each with its\n", fleetHosts, fleetHosts)
	p("own 9harnessd and %d Claude-shaped agents: copies of `sleep` named `claude` running as that user,\n", fleetAgents)
	p("each with a registry record and a %d KiB transcript), the hosts asked in parallel, each\n", fleetTranscript>>10)
	p("through the forward of its daemon's socket that its warm ssh ControlMaster holds (master and\n")
	p("forward made by a first listing through `ssh HOST 9harness relay`, %.0f ms; %d of %d forwards\n", a.warm, a.forwards, fleetHosts)
	p("live after it), against the %d single-host listings `9harness --ssh HOST ps` run one after\n", fleetHosts)
	p("another through the same masters and forwards (each run once before), measured in the same\n")
	p("run; and the fleet again with `--ssh-forward=no`, each host through ssh and its relay, for\n")
	p("scale. Table written to /dev/null. %d samples of each, interleaved; milliseconds, median and\n", len(a.fleet.samples))
	p("min–max. On 2 CPUs the hosts' own work (ten daemons scanning the process table) bounds the\n")
	p("fleet's gain.\n\n")
	p("Target: ≤ %.1fx the sum.\n\n", fleetTarget)
	p("| row | median (ms) | spread | vs the sum | target |\n")
	p("|---|---:|---:|---:|---|\n")
	p("| %s | %s | %s–%s | 1.00x | anchor |\n", a.sum.name, num(sum.med), num(sum.lo), num(sum.hi))
	r := fl.med / sum.med
	target := fmt.Sprintf("≤ %.1fx: **met**", fleetTarget)
	if r > fleetTarget {
		target = fmt.Sprintf("≤ %.1fx: **not met**", fleetTarget)
	}
	p("| %s | %s | %s–%s | %.2fx | %s |\n", a.fleet.name, num(fl.med), num(fl.lo), num(fl.hi), r, target)
	if a.relay != nil && len(a.relay.samples) > 0 {
		rl := summarize(a.relay.samples)
		p("| %s | %s | %s–%s | %.2fx | |\n", a.relay.name, num(rl.med), num(rl.lo), num(rl.hi), rl.med/sum.med)
	}
	var singles []float64
	for _, c := range a.singles {
		singles = append(singles, c.samples...)
	}
	if len(singles) > 0 {
		s := summarize(singles)
		p("\nOne single-host listing (all hosts, all samples): median %s ms, %s–%s.\n", num(s.med), num(s.lo), num(s.hi))
	}
	return b.String()
}
