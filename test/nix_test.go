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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
}

type nixosEval struct {
	Cfg         nixCfg   `json:"cfg"`
	OptionNames []string `json:"optionNames"`
	Packages    []string `json:"packages"`
	Warnings    []string `json:"warnings"`
	Socket      *struct {
		Description   string         `json:"description"`
		ListenStreams []string       `json:"listenStreams"`
		SocketConfig  map[string]any `json:"socketConfig"`
		WantedBy      []string       `json:"wantedBy"`
	} `json:"socket"`
	Service *struct {
		Description   string         `json:"description"`
		Requires      []string       `json:"requires"`
		After         []string       `json:"after"`
		ServiceConfig map[string]any `json:"serviceConfig"`
		WantedBy      []string       `json:"wantedBy"`
	} `json:"service"`
}

type hmEval struct {
	Cfg         nixCfg   `json:"cfg"`
	OptionNames []string `json:"optionNames"`
	Packages    []string `json:"packages"`
	Warnings    []string `json:"warnings"`
	Socket      *struct {
		Unit    map[string]any `json:"Unit"`
		Socket  map[string]any `json:"Socket"`
		Install map[string]any `json:"Install"`
	} `json:"socket"`
	Service *struct {
		Unit    map[string]any `json:"Unit"`
		Service map[string]any `json:"Service"`
		Install map[string]any `json:"Install"`
	} `json:"service"`
}

// unit is what both modules' output comes down to, for the assertions.
type unit struct {
	present                bool
	listen                 any
	socketMode, dirMode    any
	removeOnStop           any
	socketWantedBy         []string
	execStart              string
	serviceRequires        []string
	serviceAfter           []string
	serviceWanted          bool // any WantedBy/Install on the service
	packages, warnings     []string
	optionNames            []string
	cfgPackage, socketPath string
}

func fromNixOS(e nixosEval) unit {
	u := unit{packages: e.Packages, warnings: e.Warnings, optionNames: e.OptionNames, cfgPackage: e.Cfg.Package, socketPath: e.Cfg.SocketPath}
	if e.Socket == nil || e.Service == nil {
		return u
	}
	u.present = true
	if len(e.Socket.ListenStreams) == 1 {
		u.listen = e.Socket.ListenStreams[0]
	} else {
		u.listen = e.Socket.ListenStreams
	}
	u.socketMode, u.dirMode = e.Socket.SocketConfig["SocketMode"], e.Socket.SocketConfig["DirectoryMode"]
	u.removeOnStop = e.Socket.SocketConfig["RemoveOnStop"]
	u.socketWantedBy = e.Socket.WantedBy
	u.execStart, _ = e.Service.ServiceConfig["ExecStart"].(string)
	u.serviceRequires, u.serviceAfter = e.Service.Requires, e.Service.After
	u.serviceWanted = len(e.Service.WantedBy) > 0
	return u
}

func fromHM(e hmEval) unit {
	u := unit{packages: e.Packages, warnings: e.Warnings, optionNames: e.OptionNames, cfgPackage: e.Cfg.Package, socketPath: e.Cfg.SocketPath}
	if e.Socket == nil || e.Service == nil {
		return u
	}
	u.present = true
	u.listen = e.Socket.Socket["ListenStream"]
	u.socketMode, u.dirMode = e.Socket.Socket["SocketMode"], e.Socket.Socket["DirectoryMode"]
	u.removeOnStop = e.Socket.Socket["RemoveOnStop"]
	u.socketWantedBy = strs(e.Socket.Install["WantedBy"])
	u.execStart, _ = e.Service.Service["ExecStart"].(string)
	u.serviceRequires, u.serviceAfter = strs(e.Service.Unit["Requires"]), strs(e.Service.Unit["After"])
	u.serviceWanted = e.Service.Install != nil
	return u
}

func strs(v any) []string {
	l, _ := v.([]any)
	var s []string
	for _, x := range l {
		if str, ok := x.(string); ok {
			s = append(s, str)
		}
	}
	return s
}

// execWords splits an ExecStart line the way systemd does for the quoting
// the modules produce: bare words and double-quoted C-style strings. %%
// and $$ are left as they are (systemd turns them into % and $).
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

func TestNixModules(t *testing.T) {
	var got struct {
		NixOS map[string]nixosEval `json:"nixos"`
		HM    map[string]hmEval    `json:"hm"`
	}
	nixEval(t, "modules", &got)
	cases := map[string]map[string]unit{"nixos": {}, "home-manager": {}}
	for name, e := range got.NixOS {
		cases["nixos"][name] = fromNixOS(e)
	}
	for name, e := range got.HM {
		cases["home-manager"][name] = fromHM(e)
	}
	wantOptions := []string{"allowGroups", "allowMove", "allowUids", "enable", "extraArgs", "package", "socketPath"}
	const fakePackage = "/nix/store/0000000000000000000000000000000a-fake-9harness"
	const defaultPackage = "/nix/store/0000000000000000000000000000000a-ninep-harness-dev"

	for module, byCase := range cases {
		t.Run(module, func(t *testing.T) {
			for _, c := range []string{"default", "grants", "reachable", "disabled"} {
				if _, ok := byCase[c]; !ok {
					t.Fatalf("case %s missing from the evaluation", c)
				}
			}
			for name, u := range byCase {
				if !slices.Equal(u.optionNames, wantOptions) {
					t.Errorf("%s: options %v, want %v", name, u.optionNames, wantOptions)
				}
				if name == "disabled" {
					if u.present || len(u.packages) > 0 || len(u.warnings) > 0 {
						t.Errorf("disabled: the module still defines units, packages or warnings: %+v", u)
					}
					continue
				}
				if !u.present {
					t.Errorf("%s: no 9harness socket or service", name)
					continue
				}
				// Started only by its socket, which sockets.target wants.
				if !slices.Equal(u.socketWantedBy, []string{"sockets.target"}) {
					t.Errorf("%s: socket WantedBy %v, want [sockets.target]", name, u.socketWantedBy)
				}
				if u.serviceWanted {
					t.Errorf("%s: the service has a WantedBy/Install of its own; only its socket may start it", name)
				}
				if !slices.Equal(u.serviceRequires, []string{"9harness.socket"}) || !slices.Equal(u.serviceAfter, []string{"9harness.socket"}) {
					t.Errorf("%s: service Requires %v After %v, want 9harness.socket", name, u.serviceRequires, u.serviceAfter)
				}
				if u.removeOnStop != true {
					t.Errorf("%s: RemoveOnStop %v", name, u.removeOnStop)
				}
				if u.listen != u.socketPath {
					t.Errorf("%s: ListenStream %v, want socketPath %q", name, u.listen, u.socketPath)
				}
				if !slices.Contains(u.packages, u.cfgPackage) {
					t.Errorf("%s: packages %v lack the package %s", name, u.packages, u.cfgPackage)
				}

				w := execWords(t, u.execStart)
				if len(w) < 5 || w[0] != u.cfgPackage+"/bin/9harnessd" || !slices.Equal(w[1:5], []string{"--audit", "auto", "--idle-exit", "5m"}) {
					t.Errorf("%s: ExecStart %q: want %s/bin/9harnessd --audit auto --idle-exit 5m first", name, u.execStart, u.cfgPackage)
					continue
				}
				args := w[5:]
				for _, a := range args {
					if a == "--unix" || a == "--name" || a == "--fd" {
						t.Errorf("%s: ExecStart passes %s: the daemon would ignore the socket it is handed", name, a)
					}
				}
				if moves := slices.Contains(args, "--allow-move"); moves != (name == "grants") {
					t.Errorf("%s: --allow-move in ExecStart is %v, want it only with allowMove = true: %q", name, moves, u.execStart)
				}

				switch name {
				case "default":
					if u.cfgPackage != defaultPackage {
						t.Errorf("default: package %s, want package.nix through callPackage (%s)", u.cfgPackage, defaultPackage)
					}
					if len(args) != 0 {
						t.Errorf("default: extra ExecStart arguments %q", args)
					}
					if u.listen != "%t/9p/harness" || u.socketMode != "0600" || u.dirMode != "0700" {
						t.Errorf("default: socket %v mode %v dir %v, want %%t/9p/harness 0600 0700", u.listen, u.socketMode, u.dirMode)
					}
					if len(u.warnings) != 0 {
						t.Errorf("default: warnings %q", u.warnings)
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
					if !strings.HasSuffix(u.execStart, ` --root "claude=/srv/100%% sure/$$HOME"`) {
						t.Errorf("grants: extraArgs not quoted for systemd: %q", u.execStart)
					}
					if u.cfgPackage != fakePackage {
						t.Errorf("grants: package %s, want %s", u.cfgPackage, fakePackage)
					}
					if u.listen != "%t/9p/harness" || u.socketMode != "0666" || u.dirMode != "0755" {
						t.Errorf("grants: socket %v mode %v dir %v, want %%t/9p/harness 0666 0755", u.listen, u.socketMode, u.dirMode)
					}
					if len(u.warnings) != 1 || !strings.Contains(u.warnings[0], "socketPath") {
						t.Errorf("grants under %%t: want one warning about socketPath, got %q", u.warnings)
					}
				case "reachable":
					if !slices.Equal(args, []string{"--allow-group", "agents"}) {
						t.Errorf("reachable: ExecStart arguments %q", args)
					}
					if u.listen != "/run/9harness/%u/harness.sock" || u.socketMode != "0666" {
						t.Errorf("reachable: socket %v mode %v", u.listen, u.socketMode)
					}
					if len(u.warnings) != 0 {
						t.Errorf("reachable: warnings %q", u.warnings)
					}
				}
			}
		})
	}
}

type nixPackage struct {
	Name        string   `json:"name"`
	Pname       string   `json:"pname"`
	Version     string   `json:"version"`
	SubPackages []string `json:"subPackages"`
	Ldflags     []string `json:"ldflags"`
	VendorHash  string   `json:"vendorHash"`
	PostInstall string   `json:"postInstall"`
	DoCheck     bool     `json:"doCheck"`
	Path        string   `json:"path"`
	MainProgram string   `json:"mainProgram"`
	SrcRoot     string   `json:"srcRoot"`
	SrcFiles    []string `json:"srcFiles"`
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
	} {
		if !strings.Contains(p.PostInstall, want) {
			t.Errorf("postInstall lacks %s:\n%s", want, p.PostInstall)
		}
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
	var got struct {
		Outputs         []string            `json:"outputs"`
		Packages        map[string][]string `json:"packages"`
		Package         nixPackage          `json:"package"`
		Overlay         string              `json:"overlay"`
		NixOS           nixosEval           `json:"nixos"`
		HM              hmEval              `json:"hm"`
		NixOSOwnPackage nixosEval           `json:"nixosOwnPackage"`
	}
	nixEval(t, "flake", &got)
	for _, o := range []string{"packages", "nixosModules", "homeManagerModules", "overlays"} {
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
	for module, u := range map[string]unit{"nixosModules": fromNixOS(got.NixOS), "homeManagerModules": fromHM(got.HM)} {
		if u.cfgPackage != got.Package.Path || !strings.HasPrefix(u.execStart, got.Package.Path+"/bin/9harnessd ") {
			t.Errorf("%s.default: package %s ExecStart %q, want the flake's %s", module, u.cfgPackage, u.execStart, got.Package.Path)
		}
	}
	// ... which a package the user sets overrides.
	if p := got.NixOSOwnPackage.Cfg.Package; p != "/nix/store/0000000000000000000000000000000a-fake-9harness" {
		t.Errorf("a user's package did not win over the flake's default: %s", p)
	}
}

func TestNixPackage(t *testing.T) {
	var p nixPackage
	nixEval(t, "package", &p)
	checkPackage(t, p, "dev")
	if p.Pname != "ninep-harness" || p.DoCheck {
		t.Errorf("pname %q doCheck %v", p.Pname, p.DoCheck)
	}
}

// A wrongly typed option is refused, as the real module system would.
func TestNixTypeError(t *testing.T) {
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
	// A git repository holding packaging/ as it is in the working tree
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
	if show.HomeManagerModules == nil {
		t.Errorf("no homeManagerModules output")
	}
	for _, sys := range []string{"x86_64-linux", "aarch64-linux"} {
		if p := show.Packages[sys]["default"]; p.Type != "derivation" || !strings.HasPrefix(p.Name, "ninep-harness-") {
			t.Errorf("packages.%s.default: %+v", sys, p)
		}
	}
}
