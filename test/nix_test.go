package test

// The Nix packaging (packaging/nix), checked offline: there is no nixpkgs,
// NixOS or home-manager on the machine, and no network. Every .nix file must
// parse; tests/eval.nix evaluates the NixOS and home-manager modules, the
// flake's outputs and package.nix with a stub lib and a fake pkgs, and the
// JSON it returns is the units each module generates; vendorHash must match
// go.mod/go.sum.
//
// nix-instantiate runs with --store dummy:// (no store is opened, so /nix
// need not exist or be writable, no daemon is asked, and nothing is built
// or fetched) and with Nix's state, log, config and cache directories
// pointed at a temporary directory, so neither the host's /nix nor
// /etc/nix/nix.conf nor NIX_REMOTE/NIX_PATH matter. That works as root on
// a fresh machine with Debian's nix-bin (Nix 2.8) and as any other user.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const nixDir = "../packaging/nix"

// nixEnv is the environment every Nix command here runs in.
func nixEnv(t *testing.T) []string {
	t.Helper()
	d := t.TempDir()
	for _, sub := range []string{"state", "log", "conf", "config", "cache"} {
		if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NIX_REMOTE", "NIX_PATH", "NIX_CONF_DIR", "NIX_USER_CONF_FILES", "NIX_CONFIG",
			"NIX_STATE_DIR", "NIX_LOG_DIR", "NIX_STORE_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME":
			continue
		}
		env = append(env, kv)
	}
	// Go keeps its own caches where they were (the vendor-hash check runs go).
	if gocache, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		env = append(env, "GOCACHE="+strings.TrimSpace(string(gocache)))
	}
	return append(env,
		"NIX_STATE_DIR="+filepath.Join(d, "state"),
		"NIX_LOG_DIR="+filepath.Join(d, "log"),
		"NIX_CONF_DIR="+filepath.Join(d, "conf"),
		"XDG_CONFIG_HOME="+filepath.Join(d, "config"),
		"XDG_CACHE_HOME="+filepath.Join(d, "cache"),
	)
}

// nixInstantiate runs nix-instantiate --store dummy:// with args.
func nixInstantiate(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(require(t, "nix-instantiate"), append([]string{"--store", "dummy://"}, args...)...)
	cmd.Env = nixEnv(t)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// nixEval evaluates one attribute of tests/eval.nix into v.
func nixEval(t *testing.T, attr string, v any) {
	t.Helper()
	out, errOut, err := nixInstantiate(t, "--eval", "--strict", "--json",
		filepath.Join(nixDir, "tests/eval.nix"), "-A", attr)
	if err != nil {
		t.Fatalf("eval %s: %v\n%s", attr, err, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("eval %s: %v\n%s", attr, err, out)
	}
}

func TestNixParse(t *testing.T) {
	t.Parallel()
	var files []string
	err := filepath.WalkDir(nixDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".nix") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"flake.nix", "package.nix", "common.nix", "nixos-module.nix", "hm-module.nix", "tests/eval.nix", "tests/lib-stub.nix"} {
		if !slices.Contains(files, filepath.Join(nixDir, want)) {
			t.Errorf("%s is missing from %s", want, nixDir)
		}
	}
	for _, f := range files {
		if _, errOut, err := nixInstantiate(t, "--parse", f); err != nil {
			t.Errorf("%s does not parse: %v\n%s", f, err, errOut)
		}
	}
}

// The JSON tests/eval.nix returns for one module evaluation.
type nixCfg struct {
	Enable      bool     `json:"enable"`
	Package     string   `json:"package"`
	AllowMove   bool     `json:"allowMove"`
	AllowUids   []any    `json:"allowUids"`
	AllowGroups []any    `json:"allowGroups"`
	SocketPath  string   `json:"socketPath"`
	ExtraArgs   []string `json:"extraArgs"`
	MemoryMax   string   `json:"memoryMax"`
	TasksMax    any      `json:"tasksMax"`
	Notify      bool     `json:"notify"`
}

// nixModuleEval is one evaluation of either module. The units are in the
// module's own shape (NixOS: description, requires, serviceConfig, ...;
// home-manager: Unit, Socket, Service, Install sections); unitsOf brings
// both to the directives systemd would read.
type nixModuleEval struct {
	Cfg         nixCfg         `json:"cfg"`
	OptionNames []string       `json:"optionNames"`
	Packages    []string       `json:"packages"`
	Warnings    []string       `json:"warnings"`
	Assertions  []nixAssertion `json:"assertions"`
	UnitNames   []string       `json:"unitNames"`
	Socket      map[string]any `json:"socket"`
	Service     map[string]any `json:"service"`
	ProcSocket  map[string]any `json:"procSocket"`
	ProcService map[string]any `json:"procService"`
	// NotifyService is 9harness-notify.service, with notify = true.
	NotifyService map[string]any `json:"notifyService"`
}

type nixAssertion struct {
	Assertion bool   `json:"assertion"`
	Message   string `json:"message"`
}

// iniUnit is a unit's directives: section, key, then the values in order
// (a repeated key, or a Nix list, is one value per line). Keys that take a
// space-separated list of units or URLs are split into words, so
// "Requires=a b" and two Requires= lines compare equal.
type iniUnit map[string]map[string][]string

var unitListKeys = map[string]bool{
	"Requires": true, "After": true, "Before": true, "Wants": true, "PartOf": true,
	"BindsTo": true, "WantedBy": true, "RequiredBy": true, "Documentation": true,
}

func (u iniUnit) add(section, key string, values ...string) {
	if u[section] == nil {
		u[section] = map[string][]string{}
	}
	if unitListKeys[key] {
		var words []string
		for _, v := range values {
			words = append(words, strings.Fields(v)...)
		}
		values = words
	}
	u[section][key] = append(u[section][key], values...)
}

func (u iniUnit) get(section, key string) []string { return u[section][key] }

// without returns a copy of u without the given "Section.Key" directives.
func (u iniUnit) without(keys ...string) iniUnit {
	c := iniUnit{}
	for s, kv := range u {
		for k, v := range kv {
			if !slices.Contains(keys, s+"."+k) {
				c.add(s, k, v...)
			}
		}
	}
	return c
}

// parseUnitFile reads a unit file of packaging/systemd.
func parseUnitFile(t *testing.T, path string) iniUnit {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u, section := iniUnit{}, ""
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: a continued line; the test does not parse those", path, i+1)
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a directive: %q", path, i+1, line)
			}
			u.add(section, strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return u
}

// unitValues renders a Nix value as NixOS and home-manager do: a list is
// one line per element, a bool is true/false, a number is decimal.
func unitValues(t *testing.T, what string, v any) []string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return []string{v}
	case bool:
		return []string{strconv.FormatBool(v)}
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, unitValues(t, what, x)...)
		}
		return out
	}
	t.Errorf("%s: a value systemd cannot take: %#v", what, v)
	return nil
}

// fromNixOSUnit renders a NixOS systemd.user.{sockets,services}.<name>:
// nixos/lib/systemd-unit-options.nix and systemd-lib.nix put description,
// documentation, requires, after, partOf in [Unit], listenStreams and
// socketConfig in [Socket], serviceConfig in [Service]. NixOS makes no
// [Install] (wantedBy becomes a .wants link); it is kept as
// Install.WantedBy here so it compares with the unit files.
func fromNixOSUnit(t *testing.T, what string, n map[string]any) iniUnit {
	t.Helper()
	if n == nil {
		return nil
	}
	u := iniUnit{}
	unitKeys := map[string]string{
		"description": "Description", "documentation": "Documentation", "requires": "Requires",
		"wants": "Wants", "after": "After", "before": "Before", "bindsTo": "BindsTo", "partOf": "PartOf",
	}
	for k, v := range n {
		switch {
		case unitKeys[k] != "":
			u.add("Unit", unitKeys[k], unitValues(t, what, v)...)
		case k == "wantedBy":
			u.add("Install", "WantedBy", unitValues(t, what, v)...)
		case k == "listenStreams":
			u.add("Socket", "ListenStream", unitValues(t, what, v)...)
		case k == "unitConfig" || k == "socketConfig" || k == "serviceConfig":
			section := map[string]string{"unitConfig": "Unit", "socketConfig": "Socket", "serviceConfig": "Service"}[k]
			m, _ := v.(map[string]any)
			for dk, dv := range m {
				u.add(section, dk, unitValues(t, what, dv)...)
			}
		default:
			t.Errorf("%s: NixOS unit key %s is not rendered by this test: %v", what, k, v)
		}
	}
	return u
}

// fromHMUnit renders a home-manager unit: sections of directives already.
func fromHMUnit(t *testing.T, what string, h map[string]any) iniUnit {
	t.Helper()
	if h == nil {
		return nil
	}
	u := iniUnit{}
	for section, kv := range h {
		m, ok := kv.(map[string]any)
		if !ok {
			t.Errorf("%s: section %s is not a set of directives: %v", what, section, kv)
			continue
		}
		for k, v := range m {
			u.add(section, k, unitValues(t, what, v)...)
		}
	}
	return u
}

const (
	socketUnit      = "9harness.socket"
	serviceUnit     = "9harness.service"
	procSocketUnit  = "9harness-proc.socket"
	procServiceUnit = "9harness-proc.service"
	notifyUnit      = "9harness-notify.service"
)

// unitsOf is the four units of one evaluation, by file name; a unit the
// module does not define is absent.
func unitsOf(t *testing.T, module string, e nixModuleEval) map[string]iniUnit {
	t.Helper()
	from := fromNixOSUnit
	if module == "home-manager" {
		from = fromHMUnit
	}
	units := map[string]iniUnit{}
	for name, raw := range map[string]map[string]any{
		socketUnit: e.Socket, serviceUnit: e.Service, procSocketUnit: e.ProcSocket, procServiceUnit: e.ProcService, notifyUnit: e.NotifyService,
	} {
		if u := from(t, module+" "+name, raw); u != nil {
			units[name] = u
		}
	}
	return units
}

// The unit files the modules must reproduce, and the daemon's ExecStart
// words from 9harness.service.in with the module's package and the unit's
// own Environment= (HARNESS_IDLE; HARNESS_ARGS empty, as by default).
type refUnits struct {
	units           map[string]iniUnit
	daemonExecStart func(pkg string) []string
	procExecStart   func(pkg string) []string
}

func loadRefUnits(t *testing.T) refUnits {
	t.Helper()
	r := refUnits{units: map[string]iniUnit{}}
	for name, file := range map[string]string{
		socketUnit: "9harness.socket", serviceUnit: "9harness.service.in",
		procSocketUnit: "9harness-proc.socket", procServiceUnit: "9harness-proc.service.in",
		notifyUnit: "9harness-notify.service.in",
	} {
		r.units[name] = parseUnitFile(t, filepath.Join("../packaging/systemd", file))
	}
	expand := func(unit string) func(string) []string {
		u := r.units[unit]
		exec := u.get("Service", "ExecStart")
		if len(exec) != 1 {
			t.Fatalf("%s: ExecStart %q, want one", unit, exec)
		}
		env := map[string]string{}
		for _, e := range u.get("Service", "Environment") {
			k, v, _ := strings.Cut(e, "=")
			env[k] = v
		}
		return func(pkg string) []string {
			var words []string
			for _, w := range strings.Fields(exec[0]) {
				switch {
				case strings.HasPrefix(w, "${") && strings.HasSuffix(w, "}"):
					words = append(words, env[w[2:len(w)-1]])
				case strings.HasPrefix(w, "$"):
					words = append(words, strings.Fields(env[w[1:]])...)
				default:
					words = append(words, strings.ReplaceAll(w, "@BINDIR@", pkg+"/bin"))
				}
			}
			return words
		}
	}
	// The modules append their options where $HARNESS_ARGS stands: last.
	if exec := r.units[serviceUnit].get("Service", "ExecStart"); len(exec) != 1 || !strings.HasSuffix(exec[0], " $HARNESS_ARGS") {
		t.Fatalf("9harness.service.in: ExecStart %q does not end in $HARNESS_ARGS", exec)
	}
	r.daemonExecStart, r.procExecStart = expand(serviceUnit), expand(procServiceUnit)
	return r
}

// diffUnits lists how got differs from want, one directive a line.
func diffUnits(got, want iniUnit) []string {
	var d []string
	seen := map[string]bool{}
	for _, u := range []iniUnit{want, got} {
		for s, kv := range u {
			for k := range kv {
				key := s + "." + k
				if seen[key] {
					continue
				}
				seen[key] = true
				if g, w := got.get(s, k), want.get(s, k); !slices.Equal(g, w) {
					d = append(d, fmt.Sprintf("%s: module %q, unit file %q", key, g, w))
				}
			}
		}
	}
	slices.Sort(d)
	return d
}

// execWords splits an ExecStart line the way systemd does for the quoting
// the modules produce: bare words and double-quoted C-style strings. %%
// and $$ are left as they are (systemd turns them into % and $), so a word
// systemd must expand, such as %t/9p/harness-proc, shows as itself only if
// it was not escaped.
func execWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for line = strings.TrimLeft(line, " "); line != ""; line = strings.TrimLeft(line, " ") {
		if line[0] != '"' {
			w, rest, _ := strings.Cut(line, " ")
			words, line = append(words, w), rest
			continue
		}
		end := 1
		for ; end < len(line) && line[end] != '"'; end++ {
			if line[end] == '\\' {
				end++
			}
		}
		if end >= len(line) {
			t.Fatalf("unterminated quote in ExecStart: %s", line)
		}
		var w string
		if err := json.Unmarshal([]byte(line[:end+1]), &w); err != nil {
			t.Fatalf("ExecStart word %s: %v", line[:end+1], err)
		}
		words, line = append(words, w), line[end+1:]
	}
	return words
}

// The daemon directives that need a user namespace in a user unit: the
// proc helper must have none of them, or it could not do what it is for.
// systemd 252 skips the namespace ones silently or fails the capability
// ones (218/CAPABILITIES); 253 and later turn PrivateUsers= on for a user
// unit that has any namespace one, which would put the helper in a user
// namespace where the kernel refuses it the agents' /proc.
var namespaceOnly = []string{
	"PrivateUsers", "ProtectSystem", "ProtectHome", "PrivateDevices", "PrivateNetwork",
	"PrivateMounts", "PrivateTmp", "PrivateIPC", "ProtectKernelTunables", "ProtectKernelModules",
	"ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "ProtectProc",
	"ProcSubset", "CapabilityBoundingSet", "ReadOnlyPaths", "InaccessiblePaths", "TemporaryFileSystem",
}

// The helper's unit file itself, which the modules are compared with.
func TestHelperUnitOutsideUserNamespace(t *testing.T) {
	u := parseUnitFile(t, "../packaging/systemd/9harness-proc.service.in")
	for _, k := range namespaceOnly {
		if v := u.get("Service", k); v != nil {
			t.Errorf("9harness-proc.service.in has %s=%q: it must run outside a user namespace", k, v)
		}
	}
	// It creates no socket: systemd hands it the listening one.
	if v := u.get("Service", "RestrictAddressFamilies"); !slices.Equal(v, []string{"none"}) {
		t.Errorf("9harness-proc.service.in: RestrictAddressFamilies=%q, want none", v)
	}
}

func TestNixModules(t *testing.T) {
	t.Parallel()
	var got struct {
		NixOS map[string]nixModuleEval `json:"nixos"`
		HM    map[string]nixModuleEval `json:"hm"`
	}
	nixEval(t, "modules", &got)
	ref := loadRefUnits(t)
	wantOptions := []string{"allowGroups", "allowMove", "allowUids", "enable", "extraArgs", "memoryMax", "notify", "package", "socketPath", "tasksMax"}
	wantUnits := []string{procServiceUnit, procSocketUnit, serviceUnit, socketUnit}
	const fakePackage = "/nix/store/0000000000000000000000000000000a-fake-9harness"
	const defaultPackage = "/nix/store/0000000000000000000000000000000a-ninep-harness-dev"

	for module, byCase := range map[string]map[string]nixModuleEval{"nixos": got.NixOS, "home-manager": got.HM} {
		t.Run(module, func(t *testing.T) {
			for _, c := range []string{"default", "grants", "reachable", "disabled", "notify"} {
				if _, ok := byCase[c]; !ok {
					t.Fatalf("case %s missing from the evaluation", c)
				}
			}
			for name, e := range byCase {
				units := unitsOf(t, module, e)
				pkg := e.Cfg.Package
				if !slices.Equal(e.OptionNames, wantOptions) {
					t.Errorf("%s: options %v, want %v", name, e.OptionNames, wantOptions)
				}
				if name == "disabled" {
					if len(units) > 0 || len(e.UnitNames) > 0 || len(e.Packages) > 0 || len(e.Warnings) > 0 {
						t.Errorf("disabled: the module still defines units %v, packages %v or warnings %q", e.UnitNames, e.Packages, e.Warnings)
					}
					continue
				}
				names := slices.Sorted(slices.Values(e.UnitNames))
				want := wantUnits
				if name == "notify" {
					// The notifier: the unit file's, but for ExecStart (the
					// package's path) and Environment= (no NOTIFY_ARGS).
					want = slices.Sorted(slices.Values(append(slices.Clone(wantUnits), notifyUnit)))
					n := units[notifyUnit]
					skip := []string{"Service.ExecStart", "Service.Environment"}
					if d := diffUnits(n.without(skip...), ref.units[notifyUnit].without(skip...)); len(d) > 0 {
						t.Errorf("notify: %s differs from packaging/systemd:\n\t%s", notifyUnit, strings.Join(d, "\n\t"))
					}
					if ex := n.get("Service", "ExecStart"); len(ex) != 1 || !slices.Equal(execWords(t, ex[0]), []string{pkg + "/bin/9harness", "notify"}) {
						t.Errorf("notify: ExecStart %q, want %s/bin/9harness notify", ex, pkg)
					}
					if env := n.get("Service", "Environment"); !slices.Contains(env, "XDG_STATE_HOME=%S") {
						t.Errorf("notify: Environment %q lacks XDG_STATE_HOME=%%S", env)
					}
					delete(units, notifyUnit)
				}
				if !slices.Equal(names, want) || len(units) != len(wantUnits) {
					t.Errorf("%s: units %v, want %v", name, names, want)
					continue
				}
				sock, svc, psock, psvc := units[socketUnit], units[serviceUnit], units[procSocketUnit], units[procServiceUnit]

				// The same units as packaging/systemd. What the modules set
				// differently on purpose: ExecStart (the package's path,
				// and the options as arguments instead of Environment=),
				// and the daemon socket's path and modes when the options
				// change them.
				for _, s := range []string{socketUnit, procSocketUnit} {
					if r := units[s].get("Socket", "RemoveOnStop"); !slices.Equal(r, []string{"yes"}) {
						t.Errorf("%s: %s RemoveOnStop %q, want yes", name, s, r)
					}
				}
				for _, s := range []string{serviceUnit, procServiceUnit} {
					if v := units[s].get("Service", "Slice"); !slices.Equal(v, []string{"background.slice"}) {
						t.Errorf("%s: %s Slice %q, want background.slice", name, s, v)
					}
					if v := units[s].get("Service", "Type"); !slices.Equal(v, []string{"exec"}) {
						t.Errorf("%s: %s Type %q, want exec", name, s, v)
					}
				}
				for unitName, u := range units {
					skip := []string{"Service.ExecStart", "Service.Environment"}
					if unitName == socketUnit && name != "default" {
						skip = append(skip, "Socket.ListenStream", "Socket.SocketMode", "Socket.DirectoryMode")
					}
					if unitName == serviceUnit && name == "reachable" {
						skip = append(skip, "Service.MemoryMax", "Service.TasksMax")
					}
					if d := diffUnits(u.without(skip...), ref.units[unitName].without(skip...)); len(d) > 0 {
						t.Errorf("%s: %s differs from packaging/systemd:\n\t%s", name, unitName, strings.Join(d, "\n\t"))
					}
				}

				// Started only by its socket, which sockets.target wants;
				// the helper's socket is wanted by nothing, part of the
				// daemon's, and required by the daemon.
				if w := sock.get("Install", "WantedBy"); !slices.Equal(w, []string{"sockets.target"}) {
					t.Errorf("%s: socket WantedBy %v, want [sockets.target]", name, w)
				}
				for _, s := range []string{serviceUnit, procSocketUnit, procServiceUnit} {
					if units[s]["Install"] != nil {
						t.Errorf("%s: %s has an [Install] (%v): only 9harness.socket is enabled", name, s, units[s]["Install"])
					}
				}
				bothSockets := []string{socketUnit, procSocketUnit}
				if r, a := svc.get("Unit", "Requires"), svc.get("Unit", "After"); !slices.Equal(r, bothSockets) || !slices.Equal(a, bothSockets) {
					t.Errorf("%s: service Requires %v After %v, want %v", name, r, a, bothSockets)
				}
				if p := psock.get("Unit", "PartOf"); !slices.Equal(p, []string{socketUnit}) {
					t.Errorf("%s: helper socket PartOf %v, want [%s]", name, p, socketUnit)
				}
				if r, a := psvc.get("Unit", "Requires"), psvc.get("Unit", "After"); !slices.Equal(r, []string{procSocketUnit}) || !slices.Equal(a, []string{procSocketUnit}) {
					t.Errorf("%s: helper service Requires %v After %v, want %s", name, r, a, procSocketUnit)
				}
				// The helper's socket stays in %t, 0600, whatever socketPath is.
				if l, m := psock.get("Socket", "ListenStream"), psock.get("Socket", "SocketMode"); !slices.Equal(l, []string{"%t/9p/harness-proc"}) || !slices.Equal(m, []string{"0600"}) {
					t.Errorf("%s: helper socket %v mode %v, want %%t/9p/harness-proc 0600", name, l, m)
				}

				// The daemon in its user namespace; the helper outside it.
				if p, s := svc.get("Service", "PrivateUsers"), svc.get("Service", "ProtectSystem"); !slices.Equal(p, []string{"yes"}) || !slices.Equal(s, []string{"strict"}) {
					t.Errorf("%s: service PrivateUsers %q ProtectSystem %q, want yes, strict", name, p, s)
				}
				for _, k := range namespaceOnly {
					if v := psvc.get("Service", k); v != nil {
						t.Errorf("%s: the proc helper has %s=%q: it must run outside a user namespace", name, k, v)
					}
				}
				if v := psvc.get("Service", "NoNewPrivileges"); !slices.Equal(v, []string{"yes"}) {
					t.Errorf("%s: the proc helper lacks NoNewPrivileges=yes: %+v", name, psvc["Service"])
				}

				listen := sock.get("Socket", "ListenStream")
				if !slices.Equal(listen, []string{e.Cfg.SocketPath}) {
					t.Errorf("%s: ListenStream %v, want socketPath %q", name, listen, e.Cfg.SocketPath)
				}
				mode, dirMode := sock.get("Socket", "SocketMode"), sock.get("Socket", "DirectoryMode")
				if !slices.Contains(e.Packages, pkg) {
					t.Errorf("%s: packages %v lack the package %s", name, e.Packages, pkg)
				}

				if ps := psvc.get("Service", "ExecStart"); len(ps) != 1 || !slices.Equal(execWords(t, ps[0]), ref.procExecStart(pkg)) {
					t.Errorf("%s: helper ExecStart %q, want %q", name, ps, ref.procExecStart(pkg))
				}
				ex := svc.get("Service", "ExecStart")
				if len(ex) != 1 {
					t.Errorf("%s: ExecStart %q, want one", name, ex)
					continue
				}
				execStart := ex[0]
				// %t reaches systemd as a specifier, not escaped to %%t.
				if !strings.Contains(execStart, " --idle-exit 5m --proc-helper %t/9p/harness-proc") {
					t.Errorf("%s: ExecStart %q lacks a bare --proc-helper %%t/9p/harness-proc after --idle-exit 5m", name, execStart)
				}
				w := execWords(t, execStart)
				prefix := []string{pkg + "/bin/9harnessd", "--audit", "auto", "--idle-exit", "5m", "--proc-helper", "%t/9p/harness-proc"}
				if !slices.Equal(prefix, ref.daemonExecStart(pkg)) {
					t.Errorf("9harness.service.in's ExecStart is now %q: update the modules (and this test) to match, not %q", ref.daemonExecStart(pkg), prefix)
				}
				if len(w) < len(prefix) || !slices.Equal(w[:len(prefix)], prefix) {
					t.Errorf("%s: ExecStart %q: want %q first", name, execStart, strings.Join(prefix, " "))
					continue
				}
				args := w[len(prefix):]
				for _, a := range args {
					if a == "--unix" || a == "--name" || a == "--fd" {
						t.Errorf("%s: ExecStart passes %s: the daemon would ignore the socket it is handed", name, a)
					}
				}
				if moves := slices.Contains(args, "--allow-move"); moves != (name == "grants") {
					t.Errorf("%s: --allow-move in ExecStart is %v, want it only with allowMove = true: %q", name, moves, execStart)
				}

				switch name {
				case "default":
					if pkg != defaultPackage {
						t.Errorf("default: package %s, want package.nix through callPackage (%s)", pkg, defaultPackage)
					}
					if len(args) != 0 {
						t.Errorf("default: extra ExecStart arguments %q", args)
					}
					if !slices.Equal(listen, []string{"%t/9p/harness"}) || !slices.Equal(mode, []string{"0600"}) || !slices.Equal(dirMode, []string{"0700"}) {
						t.Errorf("default: socket %v mode %v dir %v, want %%t/9p/harness 0600 0700", listen, mode, dirMode)
					}
					if len(e.Warnings) != 0 {
						t.Errorf("default: warnings %q", e.Warnings)
					}
				case "grants":
					want := []string{"--allow-move",
						"--allow-uid", "1001", "--allow-uid", "bob",
						"--allow-group", "agents", "--allow-group", "2002",
						"--polkit", "--root", "claude=/srv/100%% sure/$$HOME"}
					if !slices.Equal(args, want) {
						t.Errorf("grants: ExecStart arguments %q, want %q", args, want)
					}
					// Quoted, and systemd's % and $ expansion escaped.
					if !strings.HasSuffix(execStart, ` --root "claude=/srv/100%% sure/$$HOME"`) {
						t.Errorf("grants: extraArgs not quoted for systemd: %q", execStart)
					}
					if pkg != fakePackage {
						t.Errorf("grants: package %s, want %s", pkg, fakePackage)
					}
					if !slices.Equal(listen, []string{"%t/9p/harness"}) || !slices.Equal(mode, []string{"0666"}) || !slices.Equal(dirMode, []string{"0755"}) {
						t.Errorf("grants: socket %v mode %v dir %v, want %%t/9p/harness 0666 0755", listen, mode, dirMode)
					}
					if len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "socketPath") {
						t.Errorf("grants under %%t: want one warning about socketPath, got %q", e.Warnings)
					}
				case "reachable":
					// memoryMax and tasksMax change the daemon's bounds.
					if m, n := svc.get("Service", "MemoryMax"), svc.get("Service", "TasksMax"); !slices.Equal(m, []string{"1G"}) || !slices.Equal(n, []string{"1024"}) {
						t.Errorf("reachable: MemoryMax %q TasksMax %q, want 1G 1024 from the options", m, n)
					}
					if !slices.Equal(args, []string{"--allow-group", "agents"}) {
						t.Errorf("reachable: ExecStart arguments %q", args)
					}
					if !slices.Equal(listen, []string{"/run/9harness/%u/harness.sock"}) || !slices.Equal(mode, []string{"0666"}) {
						t.Errorf("reachable: socket %v mode %v", listen, mode)
					}
					if len(e.Warnings) != 0 {
						t.Errorf("reachable: warnings %q", e.Warnings)
					}
				}
			}
		})
	}
}

type nixPackage struct {
	Builder           string   `json:"builder"`
	License           string   `json:"license"`
	Platforms         []string `json:"platforms"`
	Homepage          string   `json:"homepage"`
	NativeBuildInputs []string `json:"nativeBuildInputs"`
	Name              string   `json:"name"`
	Pname             string   `json:"pname"`
	Version           string   `json:"version"`
	SubPackages       []string `json:"subPackages"`
	Ldflags           []string `json:"ldflags"`
	VendorHash        string   `json:"vendorHash"`
	PostInstall       string   `json:"postInstall"`
	DoCheck           bool     `json:"doCheck"`
	Path              string   `json:"path"`
	MainProgram       string   `json:"mainProgram"`
	SrcRoot           string   `json:"srcRoot"`
	SrcFiles          []string `json:"srcFiles"`
}

func checkPackage(t *testing.T, p nixPackage, version string) {
	t.Helper()
	if p.Version != version || !slices.Contains(p.Ldflags, "-X main.version="+version) {
		t.Errorf("package version %q ldflags %q, want %s", p.Version, p.Ldflags, version)
	}
	if !slices.Equal(p.SubPackages, []string{"cmd/9harnessd", "cmd/9harness"}) || p.MainProgram != "9harnessd" {
		t.Errorf("subPackages %q mainProgram %q", p.SubPackages, p.MainProgram)
	}
	if !strings.HasPrefix(p.VendorHash, "sha256-") || len(p.VendorHash) != len("sha256-")+44 {
		t.Errorf("vendorHash %q is not an SRI sha256", p.VendorHash)
	}
	for _, want := range []string{
		"packaging/polkit/org.ninep.harness.move.policy",
		"$out/share/polkit-1/actions/org.ninep.harness.move.policy",
		"packaging/systemd/9harness.catalog",
		"$out/lib/systemd/catalog/9harness.catalog",
		"installManPage packaging/man/9harness.1 packaging/man/9harnessd.8",
		"install -Dm755 contrib/zmxify $out/bin/zmxify",
		"wrapProgram $out/bin/zmxify",
		"--set-default NINEHARNESS $out/bin/9harness",
		"-fzf-",
	} {
		if !strings.Contains(p.PostInstall, want) {
			t.Errorf("postInstall lacks %s:\n%s", want, p.PostInstall)
		}
	}
	// Every completion the checkout has is installed under the command's
	// name (installShellCompletion --cmd 9harness).
	for shell, f := range map[string]string{"bash": "9harness.bash", "zsh": "_9harness", "fish": "9harness.fish"} {
		path := "packaging/completions/" + f
		_, err := os.Stat(filepath.Join("..", path))
		if has := strings.Contains(p.PostInstall, "--"+shell+" "+path); has != (err == nil) {
			t.Errorf("completion %s: in the checkout %v, installed %v:\n%s", path, err == nil, has, p.PostInstall)
		}
		if err == nil && !strings.Contains(p.PostInstall, "installShellCompletion --cmd 9harness ") {
			t.Errorf("completions not installed with installShellCompletion --cmd 9harness:\n%s", p.PostInstall)
		}
	}
	if p.License != "MIT" || !slices.Equal(p.Platforms, []string{"x86_64-linux", "aarch64-linux"}) || p.Homepage == "" {
		t.Errorf("meta: license %q platforms %q homepage %q, want MIT on Linux (LICENSE)", p.License, p.Platforms, p.Homepage)
	}
	if !slices.Contains(p.NativeBuildInputs, "install-shell-files") || !slices.Contains(p.NativeBuildInputs, "make-wrapper") {
		t.Errorf("nativeBuildInputs %q lack installShellFiles or makeWrapper", p.NativeBuildInputs)
	}
	root, _ := filepath.Abs("..")
	if p.SrcRoot != root {
		t.Errorf("src root %s, want the repository %s", p.SrcRoot, root)
	}
	for _, f := range p.SrcFiles {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("src fileset: %v", err)
		}
	}
}

func TestNixFlake(t *testing.T) {
	t.Parallel()
	var got struct {
		Outputs         []string            `json:"outputs"`
		Packages        map[string][]string `json:"packages"`
		Package         nixPackage          `json:"package"`
		Overlay         string              `json:"overlay"`
		NixOS           nixModuleEval       `json:"nixos"`
		HM              nixModuleEval       `json:"hm"`
		NixOSOwnPackage nixModuleEval       `json:"nixosOwnPackage"`
		SameHomeModule  bool                `json:"sameHomeModule"`
		HomeModuleKeys  []string            `json:"homeModuleKeys"`
		HMBothNames     nixModuleEval       `json:"hmBothNames"`
		HMDarwin        nixModuleEval       `json:"hmDarwin"`
		Versions        map[string]string   `json:"versions"`
	}
	nixEval(t, "flake", &got)
	for _, o := range []string{"packages", "nixosModules", "homeModules", "homeManagerModules", "overlays"} {
		if !slices.Contains(got.Outputs, o) {
			t.Errorf("flake outputs %v lack %s", got.Outputs, o)
		}
	}
	for _, sys := range []string{"x86_64-linux", "aarch64-linux"} {
		if !slices.Contains(got.Packages[sys], "default") {
			t.Errorf("packages.%s has no default: %v", sys, got.Packages[sys])
		}
	}
	// The flake's version is its revision (the fake self has 0123abc).
	checkPackage(t, got.Package, "0123abc")
	if got.Overlay != "ninep-harness-0123abc" {
		t.Errorf("overlay's ninep-harness is %q", got.Overlay)
	}
	// The flake's modules default to the flake's own package ...
	for module, e := range map[string]nixModuleEval{"nixos": got.NixOS, "home-manager": got.HM} {
		units := unitsOf(t, module, e)
		for _, s := range []string{serviceUnit, procServiceUnit} {
			ex := units[s].get("Service", "ExecStart")
			if e.Cfg.Package != got.Package.Path || len(ex) != 1 || !strings.HasPrefix(ex[0], got.Package.Path+"/bin/9harnessd ") {
				t.Errorf("%s flake module: package %s, %s ExecStart %q, want the flake's %s", module, e.Cfg.Package, s, ex, got.Package.Path)
			}
		}
	}
	// ... which a package the user sets overrides.
	if p := got.NixOSOwnPackage.Cfg.Package; p != "/nix/store/0000000000000000000000000000000a-fake-9harness" {
		t.Errorf("a user's package did not win over the flake's default: %s", p)
	}
	// homeModules (home-manager's current name; tests/eval.nix's hm case
	// imports it) and homeManagerModules are one module: the same value,
	// one key, and imported under both names it declares its options once.
	if !got.SameHomeModule || len(got.HomeModuleKeys) != 2 || got.HomeModuleKeys[0] != got.HomeModuleKeys[1] || got.HomeModuleKeys[0] == "" {
		t.Errorf("homeModules.default and homeManagerModules.default differ: same %v, keys %q", got.SameHomeModule, got.HomeModuleKeys)
	}
	if len(got.HMBothNames.UnitNames) != 4 || got.HMBothNames.Cfg.Package != got.Package.Path {
		t.Errorf("both names imported: units %v package %s", got.HMBothNames.UnitNames, got.HMBothNames.Cfg.Package)
	}
	// Linux only, said by home-manager's platform assertion.
	for _, c := range []struct {
		name string
		e    nixModuleEval
		ok   bool
	}{{"linux", got.HM, true}, {"darwin", got.HMDarwin, false}} {
		if len(c.e.Assertions) != 1 || c.e.Assertions[0].Assertion != c.ok ||
			!strings.Contains(c.e.Assertions[0].Message, "services.ninep-harness") || !strings.Contains(c.e.Assertions[0].Message, "x86_64-linux") {
			t.Errorf("%s: assertions %+v, want one platform assertion that holds: %v", c.name, c.e.Assertions, c.ok)
		}
	}
	// The version is the flake's revision, with the fallbacks.
	for src, want := range map[string]string{"clean": "0123abc", "dirty": "0123abc-dirty", "noGit": "0-unstable-2026-12-01", "unknown": "dev"} {
		if v := got.Versions[src]; v != want {
			t.Errorf("version from a %s source: %q, want %q", src, v, want)
		}
	}
}

func TestNixPackage(t *testing.T) {
	t.Parallel()
	var p nixPackage
	nixEval(t, "package", &p)
	checkPackage(t, p, "dev")
	if p.Pname != "ninep-harness" || p.DoCheck {
		t.Errorf("pname %q doCheck %v", p.Pname, p.DoCheck)
	}
	// nixpkgs' default Go when it is at least go.mod's go line ...
	if p.Builder != "buildGoModule" {
		t.Errorf("built with %s, want buildGoModule (the fake nixpkgs' Go is 1.26.1)", p.Builder)
	}
	// ... and the versioned builder only when the default is older.
	var old nixPackage
	nixEval(t, "packageOldGo", &old)
	if old.Builder != "buildGo126Module" {
		t.Errorf("with a default Go 1.25: built with %s, want buildGo126Module", old.Builder)
	}
}

// A wrongly typed option is refused, as the real module system would.
func TestNixTypeError(t *testing.T) {
	t.Parallel()
	_, errOut, err := nixInstantiate(t, "--eval", "--strict", "--json",
		filepath.Join(nixDir, "tests/eval.nix"), "-A", "bad")
	if err == nil {
		t.Fatal(`allowMove = "yes" evaluated`)
	}
	if !strings.Contains(errOut, "services.ninep-harness.allowMove' is not of type `boolean'") {
		t.Errorf("want a type error for allowMove, got:\n%s", errOut)
	}
}

// vendorHash follows go.mod and go.sum.
func TestNixVendorHash(t *testing.T) {
	t.Parallel()
	require(t, "nix")
	require(t, "go")
	cmd := exec.Command(filepath.Join(nixDir, "update-vendor-hash.sh"), "--check")
	cmd.Env = nixEnv(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// flake.nix through the real flake machinery (inputs, outputs, the
// ?dir=packaging/nix source), its nixpkgs input replaced by
// tests/fake-nixpkgs: `nix flake check --no-build` and `nix flake show`.
// Nix needs a store to copy the flake into: a temporary one, never /nix.
func TestNixFlakeCheck(t *testing.T) {
	t.Parallel()
	nix := require(t, "nix")
	git := require(t, "git")
	tmp := t.TempDir()
	// Nix makes store paths read-only; let TempDir's cleanup remove them.
	t.Cleanup(func() { exec.Command("chmod", "-R", "u+w", tmp).Run() })
	env := nixEnv(t)
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, o.String(), e.String())
		}
		return o.String()
	}
	// A git repository holding packaging/ and go.mod as they are in the working tree
	// (a git+file flake sees only files git tracks; nothing is committed).
	repo := filepath.Join(tmp, "repo")
	fake := filepath.Join(tmp, "fake-nixpkgs")
	src, err := filepath.Abs("../packaging")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	run(tmp, "cp", "-r", src, filepath.Join(repo, "packaging"))
	// package.nix reads go.mod's go line to choose the Go builder.
	run(tmp, "cp", filepath.Join(src, "../go.mod"), filepath.Join(repo, "go.mod"))
	run(tmp, "cp", "-r", filepath.Join(src, "nix/tests/fake-nixpkgs"), fake)
	run(tmp, "cp", filepath.Join(src, "nix/tests/lib-stub.nix"), fake)
	run(repo, git, "init", "-q")
	run(repo, git, "add", "-A")

	flake := "git+file://" + repo + "?dir=packaging/nix"
	common := []string{"--extra-experimental-features", "nix-command flakes", "--store", filepath.Join(tmp, "store")}
	over := []string{flake, "--override-input", "nixpkgs", "path:" + fake, "--no-write-lock-file"}
	run(tmp, nix, append(append(append([]string{}, common...), "flake", "check", "--no-build"), over...)...)
	out := run(tmp, nix, append(append(append([]string{}, common...), "flake", "show", "--json"), over...)...)
	var show struct {
		NixOSModules map[string]struct {
			Type string `json:"type"`
		} `json:"nixosModules"`
		HomeModules        map[string]any `json:"homeModules"`
		HomeManagerModules map[string]any `json:"homeManagerModules"`
		Packages           map[string]map[string]struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatalf("flake show: %v\n%s", err, out)
	}
	if show.NixOSModules["default"].Type != "nixos-module" {
		t.Errorf("nixosModules.default: %+v", show.NixOSModules)
	}
	if show.HomeManagerModules == nil || show.HomeModules == nil {
		t.Errorf("homeModules %v, homeManagerModules %v: want both outputs", show.HomeModules, show.HomeManagerModules)
	}

	// nix eval, through a flake that takes this one as its input (with the
	// fake nixpkgs): homeModules.default and homeManagerModules.default are
	// the same module value, and the package's license is MIT.
	wrapper := filepath.Join(tmp, "wrapper")
	if err := os.MkdirAll(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapperFlake := `{
  inputs.h.url = "` + flake + `";
  inputs.h.inputs.nixpkgs.url = "path:` + fake + `";
  outputs = { h, ... }: {
    check = {
      same = h.homeModules.default == h.homeManagerModules.default;
      keys = [ h.homeModules.default.key h.homeManagerModules.default.key ];
      license = h.packages.x86_64-linux.default.meta.license.spdxId;
      platforms = h.packages.x86_64-linux.default.meta.platforms;
    };
  };
}
`
	if err := os.WriteFile(filepath.Join(wrapper, "flake.nix"), []byte(wrapperFlake), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(tmp, nix, append(append([]string{}, common...), "eval", "--json", "path:"+wrapper+"#check", "--no-write-lock-file")...)
	var check struct {
		Same      bool     `json:"same"`
		Keys      []string `json:"keys"`
		License   string   `json:"license"`
		Platforms []string `json:"platforms"`
	}
	if err := json.Unmarshal([]byte(out), &check); err != nil {
		t.Fatalf("nix eval: %v\n%s", err, out)
	}
	if !check.Same || len(check.Keys) != 2 || check.Keys[0] != check.Keys[1] {
		t.Errorf("nix eval: homeModules.default and homeManagerModules.default are not the same module: %s", out)
	}
	if check.License != "MIT" || !slices.Equal(check.Platforms, []string{"x86_64-linux", "aarch64-linux"}) {
		t.Errorf("nix eval: meta.license %q platforms %q, want MIT on Linux", check.License, check.Platforms)
	}
	for _, sys := range []string{"x86_64-linux", "aarch64-linux"} {
		if p := show.Packages[sys]["default"]; p.Type != "derivation" || !strings.HasPrefix(p.Name, "ninep-harness-") {
			t.Errorf("packages.%s.default: %+v", sys, p)
		}
	}
}
