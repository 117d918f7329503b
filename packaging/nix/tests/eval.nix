# Offline evaluation of the modules, package.nix and flake.nix, without
# nixpkgs, NixOS or home-manager: lib is tests/lib-stub.nix, pkgs is a fake
# whose buildGoModule returns its arguments, and a small evaluator below
# does what the module system does for these modules (option defaults,
# type checks, mkIf, mkDefault priorities, imports). Each case returns
# the units it generates, in the shape NixOS or home-manager receives.
#
#   nix-instantiate --store dummy:// --eval --strict --json tests/eval.nix
#   nix-instantiate --store dummy:// --eval --strict --json tests/eval.nix -A bad
#
# test/nix_test.go runs both and asserts on the JSON.
let
  lib = import ./lib-stub.nix;
  inherit (builtins)
    all
    attrNames
    concatMap
    elem
    filter
    foldl'
    head
    isAttrs
    isBool
    isFunction
    isInt
    isList
    isString
    length
    tail
    ;

  fakeHash = "0000000000000000000000000000000a";

  # A derivation that is never built: its name and store path only.
  fakeDrv = name: {
    type = "derivation";
    inherit name;
    outPath = "${builtins.storeDir}/${fakeHash}-${name}";
  };

  # nixpkgs for one system, its default Go at goVersion.
  fakePkgsWith =
    goVersion: system:
    let
      goBuilder =
        builder: attrs:
        attrs
        // fakeDrv "${attrs.pname}-${attrs.version}"
        // {
          inherit builder;
        };
      self = {
        stdenv.hostPlatform.system = system;
        go = fakeDrv "go-${goVersion}" // {
          version = goVersion;
        };
        buildGoModule = goBuilder "buildGoModule";
        buildGo126Module = goBuilder "buildGo126Module";
        installShellFiles = fakeDrv "install-shell-files";
        makeWrapper = fakeDrv "make-wrapper";
        coreutils = fakeDrv "coreutils-9.7";
        gawk = fakeDrv "gawk-5.3.2";
        gnugrep = fakeDrv "gnugrep-3.12";
        gnused = fakeDrv "gnused-4.9";
        fzf = fakeDrv "fzf-0.65.2";
        # Like nixpkgs' callPackage: only the arguments the function takes.
        callPackage =
          fn: args:
          let
            f = if isFunction fn then fn else import fn;
          in
          f (builtins.intersectAttrs (builtins.functionArgs f) (self // { inherit lib; }) // args);
      };
    in
    self;
  fakePkgs = fakePkgsWith "1.26.1";

  pkgs = fakePkgs "x86_64-linux";

  # A package given as a plain store path, as a user may.
  fakePackage = "${builtins.storeDir}/${fakeHash}-fake-9harness";

  # --- a minimal module evaluator ---------------------------------------

  typeOf = d: if isAttrs d then d._type or null else null;

  # Every module, imports included, applied to its arguments, each key
  # once as lib.modules does: a module's key is its key attribute, or the
  # file it was imported from; a key seen before is skipped with its
  # imports.
  keyOf =
    m:
    if isAttrs m && m ? key then
      m.key
    else if builtins.isPath m || isString m then
      toString m
    else
      null;
  walk =
    args: acc: m:
    let
      k = keyOf m;
      v = if isFunction m then m args else if isAttrs m then m else import m;
      r = if isFunction v then v args else v;
    in
    if k != null && elem k acc.keys then
      acc
    else
      foldl' (walk args) {
        keys = acc.keys ++ lib.optional (k != null) k;
        modules = acc.modules ++ [ r ];
      } (r.imports or [ ]);
  collectAll =
    args: modules:
    (foldl' (walk args) {
      keys = [ ];
      modules = [ ];
    } modules).modules;

  # The definitions a module makes at an option path, mkIf pushed down as
  # the module system does: the condition is only read for that path.
  defsAt =
    path: d:
    if typeOf d == "if" then
      map (x: x // { conds = [ d.condition ] ++ x.conds; }) (defsAt path d.content)
    else if path == [ ] then
      [
        {
          value = d;
          conds = [ ];
        }
      ]
    else if isAttrs d && d ? ${head path} then
      defsAt (tail path) d.${head path}
    else
      [ ];

  configOf = r: r.config or (removeAttrs r [ "imports" "options" "_file" "key" ]);

  # The value of one option: the highest-priority active definitions,
  # merged (lists concatenate), type-checked, or the default.
  optionValue =
    modules: name: path: opt:
    let
      active = filter (x: all (c: c) x.conds) (concatMap (r: defsAt path (configOf r)) modules);
      prio = x: if typeOf x.value == "override" then x.value.priority else 100;
      unwrap = x: if typeOf x.value == "override" then x.value.content else x.value;
      best = foldl' (p: x: if prio x < p then prio x else p) 1500 active;
      chosen = map unwrap (filter (x: prio x == best) active);
      v =
        if active == [ ] then
          opt.default
        else if opt.type.name == "listOf" then
          concatMap (x: x) chosen
        else if all (x: x == head chosen) chosen then
          head chosen
        else
          throw "The option `${name}' has conflicting definition values.";
    in
    if opt.type.check v then
      v
    else
      throw "A definition for option `${name}' is not of type `${opt.type.description}'.";

  # The merged output definitions at a path the real NixOS/home-manager
  # declares (units, packages, warnings).
  outputAt =
    modules: path:
    let
      active = filter (x: all (c: c) x.conds) (concatMap (r: defsAt path (configOf r)) modules);
      vals = map (x: x.value) active;
    in
    if vals == [ ] then
      null
    else if all isList vals then
      concatMap (x: x) vals
    else if length vals == 1 then
      head vals
    else
      throw "${lib.concatStringsSep "." path} is defined more than once";

  evalModule =
    {
      modules,
      outputs,
      pkgs,
    }:
    let
      args = {
        inherit lib pkgs config;
      };
      all' = collectAll args modules;
      decls = filter (o: o != null) (map (r: r.options.services.ninep-harness or null) all');
      opts =
        if length decls == 1 then
          head decls
        else
          throw "services.ninep-harness is declared ${toString (length decls)} times";
      config.services.ninep-harness = builtins.mapAttrs (
        n: o: optionValue all' "services.ninep-harness.${n}" [ "services" "ninep-harness" n ] o
      ) opts;
      # Nothing may be defined where the real system declares no option.
      stray = filter (n: !(elem n outputs.roots)) (
        concatMap (r: let c = configOf r; in attrNames (if typeOf c == "if" then c.content else c)) all'
      );
    in
    if stray != [ ] then
      throw "defined outside any declared option: ${toString stray}"
    else
      {
        cfg = config.services.ninep-harness;
        socket = outputAt all' [ "systemd" "user" "sockets" "9harness" ];
        service = outputAt all' [ "systemd" "user" "services" "9harness" ];
        procSocket = outputAt all' [ "systemd" "user" "sockets" "9harness-proc" ];
        procService = outputAt all' [ "systemd" "user" "services" "9harness-proc" ];
        notifyService = outputAt all' [ "systemd" "user" "services" "9harness-notify" ];
        # Every unit the module declares, so no stray one goes unnoticed; a
        # name whose definitions are all under a false mkIf is no unit, as
        # attrsOf drops it.
        unitNames =
          let
            names =
              kind:
              filter (n: outputAt all' [ "systemd" "user" "${kind}s" n ] != null) (
                attrNames (orEmptyAttrs (outputAt all' [ "systemd" "user" "${kind}s" ]))
              );
          in
          map (n: "${n}.socket") (names "socket") ++ map (n: "${n}.service") (names "service");
        packages = outputAt all' outputs.packages;
        warnings = orEmpty (outputAt all' [ "warnings" ]);
        assertions = map (a: { inherit (a) assertion message; }) (orEmpty (outputAt all' [ "assertions" ]));
        optionNames = attrNames opts;
      };

  orEmpty = l: if l == null then [ ] else l;
  orEmptyAttrs = a: if a == null then { } else a;

  # --- the unit shapes NixOS and home-manager accept ---------------------

  primitive = v: isString v || isInt v || isBool v;
  unitValue = v: primitive v || (isList v && all primitive v);
  checkKeys =
    what: allowed: set:
    let
      bad = filter (k: !(elem k allowed)) (attrNames set);
    in
    if bad == [ ] then set else throw "${what}: not a valid key: ${toString bad}";

  # nixos/lib/systemd-unit-options.nix: the options these units may use.
  nixosUnit =
    extra: u:
    if u == null then
      null
    else
      let
        u' = checkKeys "NixOS unit" ([
          "description"
          "documentation"
          "requires"
          "wants"
          "after"
          "before"
          "bindsTo"
          "partOf"
          "wantedBy"
          "requiredBy"
          "unitConfig"
          "enable"
        ] ++ extra) u;
        lists = filter (k: isList u'.${k}) (attrNames u');
        sections = filter (k: isAttrs u'.${k}) (attrNames u');
      in
      if all (k: all isString u'.${k}) lists && all (k: all unitValue (builtins.attrValues u'.${k})) sections then
        u'
      else
        throw "NixOS unit: a value has the wrong type";

  # home-manager's modules/systemd.nix unitBaseType: sections of
  # primitives or lists of primitives.
  hmUnit =
    u:
    if u == null then
      null
    else
      let
        u' = checkKeys "home-manager unit" [ "Unit" "Socket" "Service" "Install" ] u;
      in
      if all (s: isAttrs u'.${s} && all unitValue (builtins.attrValues u'.${s})) (attrNames u') then
        u'
      else
        throw "home-manager unit: a section value has the wrong type";

  nixos =
    modules:
    let
      e = evalModule {
        inherit modules pkgs;
        outputs = {
          roots = [ "services" "systemd" "environment" "warnings" ];
          packages = [ "environment" "systemPackages" ];
        };
      };
    in
    e
    // {
      socket = nixosUnit [ "listenStreams" "socketConfig" ] e.socket;
      service = nixosUnit [ "serviceConfig" "environment" "path" ] e.service;
      procSocket = nixosUnit [ "listenStreams" "socketConfig" ] e.procSocket;
      procService = nixosUnit [ "serviceConfig" "environment" "path" ] e.procService;
      notifyService = nixosUnit [ "serviceConfig" "environment" "path" ] e.notifyService;
      packages = map toString (orEmpty e.packages);
    };

  hm = hmOn pkgs;
  hmOn =
    pkgs: modules:
    let
      e = evalModule {
        inherit modules pkgs;
        outputs = {
          roots = [ "services" "systemd" "home" "warnings" "assertions" ];
          packages = [ "home" "packages" ];
        };
      };
    in
    e
    // {
      socket = hmUnit e.socket;
      service = hmUnit e.service;
      procSocket = hmUnit e.procSocket;
      procService = hmUnit e.procService;
      notifyService = hmUnit e.notifyService;
      packages = map toString (orEmpty e.packages);
    };

  # --- the cases -----------------------------------------------------------

  configs = {
    default = {
      services.ninep-harness.enable = true;
    };
    grants = {
      services.ninep-harness = {
        enable = true;
        package = fakePackage;
        allowMove = true;
        allowUids = [
          1001
          "bob"
        ];
        allowGroups = [
          "agents"
          2002
        ];
        extraArgs = [
          "--polkit"
          "--root"
          "claude=/srv/100% sure/$HOME"
        ];
      };
    };
    reachable = {
      services.ninep-harness = {
        enable = true;
        package = fakePackage;
        allowGroups = [ "agents" ];
        socketPath = "/run/9harness/%u/harness.sock";
        memoryMax = "1G";
        tasksMax = 1024;
      };
    };
    disabled = {
      services.ninep-harness.allowMove = true;
    };
    notify = {
      services.ninep-harness = {
        enable = true;
        notify = true;
      };
    };
  };

  forBoth = f: {
    nixos = builtins.mapAttrs (_: c: nixos (f ../nixos-module.nix c)) configs;
    hm = builtins.mapAttrs (_: c: hm (f ../hm-module.nix c)) configs;
  };

  # flake.nix's outputs with a fake nixpkgs input and what self knows of
  # its source (shortRev for a clean git tree).
  flakeWith =
    src:
    let
      outputs = (import ../flake.nix).outputs {
        self = outputs // src;
        nixpkgs = {
          inherit lib;
          legacyPackages = lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] fakePkgs;
        };
      };
    in
    outputs;
  flake = flakeWith {
    shortRev = "0123abc";
    lastModifiedDate = "20261201173000";
  };
  flakeVersion = src: (flakeWith src).packages.x86_64-linux.default.version;

  describePackage = p: {
    inherit (p)
      name
      pname
      version
      subPackages
      ldflags
      vendorHash
      postInstall
      doCheck
      builder
      ;
    path = toString p;
    mainProgram = p.meta.mainProgram;
    license = p.meta.license.spdxId;
    platforms = p.meta.platforms;
    homepage = p.meta.homepage;
    nativeBuildInputs = map (d: d.name) p.nativeBuildInputs;
    srcRoot = toString p.src.root;
    srcFiles = map toString p.src.fileset;
  };
in
{
  # Each module on its own, as `imports = [ ./packaging/nix/nixos-module.nix ]`.
  modules = forBoth (m: c: [
    m
    c
  ]);

  # The flake's modules, which default to the flake's own package.
  flake = {
    outputs = attrNames flake;
    packages = builtins.mapAttrs (_: ps: attrNames ps) flake.packages;
    package = describePackage flake.packages.x86_64-linux.default;
    overlay = (flake.overlays.default pkgs { }).ninep-harness.name;
    nixos = nixos [
      flake.nixosModules.default
      configs.default
    ];
    # home-manager's current name for the output.
    hm = hm [
      flake.homeModules.default
      configs.default
    ];
    # The same module value under the old name ...
    sameHomeModule = flake.homeModules.default == flake.homeManagerModules.default;
    homeModuleKeys = [
      flake.homeModules.default.key
      flake.homeManagerModules.default.key
    ];
    # ... so a configuration importing both names gets it once, not the
    # options twice.
    hmBothNames = hm [
      flake.homeModules.default
      flake.homeManagerModules.default
      configs.default
    ];
    # Linux only: on darwin the assertion fails, naming the module.
    hmDarwin = (hmOn (fakePkgs "aarch64-darwin")) [
      flake.homeModules.default
      { services.ninep-harness.package = fakePackage; }
      configs.default
    ];
    # The version from what self knows of the source.
    versions = {
      clean = flakeVersion {
        shortRev = "0123abc";
        lastModifiedDate = "20261201173000";
      };
      dirty = flakeVersion {
        dirtyShortRev = "0123abc-dirty";
        lastModifiedDate = "20261201173000";
      };
      noGit = flakeVersion { lastModifiedDate = "20261201173000"; };
      unknown = flakeVersion { };
    };
    # A package the user sets wins over the flake's mkDefault.
    nixosOwnPackage = nixos [
      flake.nixosModules.default
      configs.grants
    ];
  };

  # package.nix through callPackage, as the modules' default does.
  package = describePackage (pkgs.callPackage ../package.nix { });
  # With a nixpkgs whose default Go is older than go.mod's go line.
  packageOldGo = describePackage ((fakePkgsWith "1.25.4" "x86_64-linux").callPackage ../package.nix { });

  # Must fail: a string where a bool belongs.
  bad = nixos [
    ../nixos-module.nix
    {
      services.ninep-harness = {
        enable = true;
        allowMove = "yes";
      };
    }
  ];
}
