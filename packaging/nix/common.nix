# What the NixOS and the home-manager module share: the options under
# services.ninep-harness, the daemon's command line, and the four units'
# contents (descriptions, dependencies, [Service] directives), kept equal
# to packaging/systemd/*.in and *.socket. Each module only shapes these
# into its own unit syntax. test/nix_test.go compares the generated units
# with the files in packaging/systemd, so the two cannot drift apart.
#
# The attribute is `ninep-harness`, not `9harness`: a Nix identifier cannot
# start with a digit, so `services.9harness.enable` does not parse and every
# use would need quotes (`services."9harness".enable`). `ninep` is the
# project's own spelling of 9P elsewhere (the polkit action is
# org.ninep.harness.move). The systemd units keep their real names,
# 9harness.{socket,service} and 9harness-proc.{socket,service}, quoted
# where Nix needs it.
{ lib }:
let
  inherit (lib) mkOption mkEnableOption types;

  grants = cfg: cfg.allowUids != [ ] || cfg.allowGroups != [ ];

  # One ExecStart word. Plain words stay bare; anything else becomes a
  # double-quoted C-style string with systemd's own specifier (%) and
  # variable ($) expansion escaped, as nixpkgs' utils.escapeSystemdExecArg
  # does: an argument reaches the daemon exactly as written.
  escapeArg =
    a:
    if builtins.match "[A-Za-z0-9_@+=:,./-]+" a != null then
      a
    else
      builtins.replaceStrings [ "%" "$" ] [ "%%" "$$" ] (builtins.toJSON a);

  # One ExecStart word that systemd must expand: the module's own constants
  # only (never an option's value), such as %t/9p/harness-proc. escapeArg
  # would turn % into %% and hand the daemon a literal "%t". So such a
  # word is passed through unquoted, and only if it is plain characters and
  # single-letter specifiers (%t, %u, ...): nothing systemd would split,
  # unquote or $-expand.
  specifierArg =
    a:
    if builtins.match "([A-Za-z0-9_@+=:,./-]|%[A-Za-z])+" a != null then
      a
    else
      throw "common.nix: specifierArg: ${a} is not plain characters and %-specifiers";

  # The [Service] hardening, as packaging/systemd/*.service.in has it.
  # Values are the strings the .in files use ("yes", not true), so the
  # rendered units are the same text; a list is one line per element, in
  # order (the second SystemCallFilter= removes from the first).
  #
  # What both units get: the seccomp and prctl hardening, which a user
  # unit enforces without a user namespace.
  sharedHardening = {
    NoNewPrivileges = "yes";
    RestrictNamespaces = "yes";
    RestrictRealtime = "yes";
    RestrictSUIDSGID = "yes";
    LockPersonality = "yes";
    MemoryDenyWriteExecute = "yes";
    SystemCallArchitectures = "native";
    SystemCallFilter = [
      "@system-service"
      "~@privileged @resources"
    ];
    SystemCallErrorNumber = "EPERM";
    UMask = "0077";
    KeyringMode = "private";
    IPAddressDeny = "any";
  };

  # The proc helper: nothing else. It must stay outside any user namespace
  # (inside one the kernel refuses it the /proc reads it exists for), and
  # every namespace directive would either be skipped by a user manager
  # (systemd 252) or turn PrivateUsers= on for it (253 and later);
  # 9harness-proc.service.in lists them with the reasons. It creates no
  # socket (systemd hands it the listening one).
  helperHardening = sharedHardening // {
    RestrictAddressFamilies = "none";
  };

  # What the daemon gets on top: the sandbox a user unit enforces only
  # inside a user namespace, hence PrivateUsers=yes. Inside it the kernel
  # refuses /proc/<pid>/cwd, environ and fd/ of the user's own agents, and
  # SO_PEERCRED names other users 65534: the proc helper, outside the
  # namespace, answers those (9harness.service.in explains it in full).
  # Never give these to the helper: it would lose exactly what it is for.
  daemonHardening = sharedHardening // {
    RestrictAddressFamilies = "AF_UNIX";
    PrivateUsers = "yes";
    ProtectSystem = "strict";
    ProtectHome = "read-only";
    PrivateDevices = "yes";
    PrivateNetwork = "yes";
    PrivateMounts = "yes";
    ProtectKernelTunables = "yes";
    ProtectKernelModules = "yes";
    ProtectKernelLogs = "yes";
    ProtectControlGroups = "yes";
    ProtectClock = "yes";
    ProtectHostname = "yes";
    # Empty: no capabilities at all (CapabilityBoundingSet= in the unit).
    CapabilityBoundingSet = "";
  };

  # Both services: started by their sockets, in the user's background
  # slice (the helper answers only its sibling unit in the same slice).
  # exec: active only once 9harnessd was executed, so a missing binary
  # fails the start; the daemon does not call sd_notify.
  serviceBase = {
    Type = "exec";
    Slice = "background.slice";
  };
in
rec {
  # The option set, given the package to default to.
  options =
    { defaultPackage, defaultPackageText }:
    {
      enable = mkEnableOption "9harnessd, the read-only 9P2000.L view of your AI agents' state, socket-activated by your systemd user manager";

      package = mkOption {
        type = types.package;
        default = defaultPackage;
        defaultText = lib.literalExpression defaultPackageText;
        description = "The 9harness package: its bin/9harnessd is the daemon the socket starts.";
      };

      allowMove = mkOption {
        type = types.bool;
        default = false;
        description = ''
          Pass --allow-move: the daemon's own uid may move agents (the one
          write). Off by default; no grant below extends it to another uid.
        '';
      };

      allowUids = mkOption {
        type = types.listOf (types.either types.int types.str);
        default = [ ];
        example = [ 1001 "bob" ];
        description = ''
          Users (names or uids) that may also read the tree: one
          --allow-uid each. With any grant the socket is made 0666 (the
          daemon's kernel-attested check decides, as it does when it makes
          its own socket); set socketPath to a directory they can traverse.
        '';
      };

      allowGroups = mkOption {
        type = types.listOf (types.either types.int types.str);
        default = [ ];
        example = [ "agents" ];
        description = "Groups (names or gids) whose members may also read the tree: one --allow-group each. See allowUids.";
      };

      socketPath = mkOption {
        type = types.str;
        default = "%t/9p/harness";
        example = "/run/9harness/%u/harness.sock";
        description = ''
          Where the socket unit listens (ListenStream=; %t is
          $XDG_RUNTIME_DIR, %u the user name). The default is the path
          9harnessd and the 9harness client use when given no socket. For
          grants, use a directory the other users can traverse but only
          you can write, e.g. one made per user by
          systemd.tmpfiles.rules = [ "d /run/9harness/alice 0755 alice alice -" ].
        '';
      };

      memoryMax = mkOption {
        type = types.str;
        default = "512M";
        example = "1G";
        description = ''
          The daemon's MemoryMax=: a backstop under its own bounds, which
          hold it under 256 MiB resident whatever a peer does (idle, about
          15 MiB). Past it the kernel stops the daemon and the socket starts
          a fresh one on the next connection.
        '';
      };

      tasksMax = mkOption {
        type = types.either types.int types.str;
        default = 512;
        example = "infinity";
        description = ''
          The daemon's TasksMax=: its threads (one per CPU, plus one per
          system call that blocks) and a move's short-lived children.
        '';
      };

      notify = mkEnableOption "9harness-notify.service, which runs `9harness notify` while you are logged in: it pushes each agent that starts waiting, goes idle or exits to ntfy, a webhook, the desktop or a command, as ~/.config/9harness/notify.conf says (9harness help notify); without that file it stops with a config error";

      extraArgs = mkOption {
        type = types.listOf types.str;
        default = [ ];
        example = [ "--polkit" "--quiet" ];
        description = ''
          More 9harnessd arguments, appended last: a later --audit or
          --idle-exit overrides the module's. Never --unix, --name or --fd:
          the daemon would then ignore the socket systemd hands it.
        '';
      };
    };

  # The daemon's ExecStart: 9harnessd --audit auto --idle-exit 5m
  # --proc-helper %t/9p/harness-proc, then --allow-move if asked, the
  # grants, and extraArgs last (a later flag wins). Every word is escaped
  # for systemd except the helper's socket path, whose %t systemd must
  # expand: it goes through specifierArg, not escapeArg.
  execStart =
    cfg:
    lib.concatStringsSep " " (
      map escapeArg [
        "${cfg.package}/bin/9harnessd"
        "--audit"
        "auto"
        "--idle-exit"
        "5m"
        "--proc-helper"
      ]
      ++ [ (specifierArg procSocketPath) ]
      ++ map escapeArg (optionArgs cfg)
    );

  # The arguments the options add, in order.
  optionArgs =
    cfg:
    lib.optional cfg.allowMove "--allow-move"
    ++ lib.concatMap (u: [
      "--allow-uid"
      (toString u)
    ]) cfg.allowUids
    ++ lib.concatMap (g: [
      "--allow-group"
      (toString g)
    ]) cfg.allowGroups
    ++ cfg.extraArgs;

  # The proc helper's ExecStart (9harness-proc.service.in).
  procExecStart =
    cfg:
    lib.concatStringsSep " " (
      map escapeArg [
        "${cfg.package}/bin/9harnessd"
        "--serve-proc-helper"
        "--idle-exit"
        "5m"
      ]
    );

  # Where the proc helper listens and the daemon asks it. It stays here
  # when socketPath is moved for grants: only the daemon, running as the
  # same user, connects to it (the helper answers for that uid's
  # processes only), so it belongs in %t (/run/user/UID, mode 0700) with
  # mode 0600, whoever else may reach the daemon's own socket.
  procSocketPath = "%t/9p/harness-proc";
  # Its [Socket] settings besides ListenStream=.
  procSocketConfig = {
    SocketMode = "0600";
    DirectoryMode = "0700";
    RemoveOnStop = removeOnStop;
  };
  # Both sockets, as in packaging/systemd: no socket file is left once the
  # unit stops, so a client says "no such file", not "connection refused".
  removeOnStop = "yes";

  # The units' names (as other units refer to them) and [Unit] contents,
  # as in packaging/systemd.
  socketUnit = "9harness.socket";
  procSocketUnit = "9harness-proc.socket";
  documentation = [ "man:9harnessd(8)" ];
  descriptions = {
    socket = "9harness socket: the state of your AI coding agents as a 9P tree";
    service = "9harness daemon: the state of your AI coding agents as a 9P tree";
    procSocket = "9harness proc helper socket: /proc reads for the sandboxed daemon";
    procService = "9harness proc helper: /proc reads for the sandboxed daemon";
  };

  # The [Service] sections: NixOS's serviceConfig, home-manager's Service.
  serviceConfig =
    cfg:
    serviceBase
    // {
      ExecStart = execStart cfg;
      # Above the daemon's wait for moves in flight (Mover.Bound, 89 s).
      TimeoutStopSec = "100s";
      # The owner-only directory of the moves' launch sockets (%t/9harness).
      RuntimeDirectory = "9harness";
      RuntimeDirectoryMode = "0700";
      RuntimeDirectoryPreserve = "yes";
      # Resource bounds (9harness.service.in says why these values).
      MemoryMax = cfg.memoryMax;
      TasksMax = toString cfg.tasksMax;
    }
    // daemonHardening;

  procServiceConfig =
    cfg:
    serviceBase
    // {
      ExecStart = procExecStart cfg;
      # Its load follows its daemon's (9harness-proc.service.in).
      MemoryMax = "256M";
      TasksMax = "256";
    }
    // helperHardening;

  # 9harness-notify.service (9harness-notify.service.in says why each
  # line): a client of the daemon and of the network, not socket-activated.
  notifyServiceUnit = "9harness-notify.service";
  notifyDescription = "9harness notify: push agents that need you to ntfy, a webhook or the desktop";
  notifyDocumentation = [ "man:9harness(1)" ];
  notifyWants = [ socketUnit ];
  notifyAfter = [
    socketUnit
    "network-online.target"
  ];
  notifyWantedBy = [ "default.target" ];
  notifyServiceConfig =
    cfg:
    # Not IPAddressDeny=: it talks to ntfy and webhooks.
    removeAttrs sharedHardening [ "IPAddressDeny" ]
    // {
      Type = "simple";
      Slice = "background.slice";
      ExecStart = lib.concatStringsSep " " (
        map escapeArg [
          "${cfg.package}/bin/9harness"
          "notify"
        ]
      );
      Restart = "on-failure";
      RestartSec = "5s";
      RestartPreventExitStatus = "2";
      StateDirectory = "9harness";
      StateDirectoryMode = "0700";
      Environment = [ "XDG_STATE_HOME=%S" ];
      MemoryMax = "128M";
      TasksMax = "64";
      RestrictAddressFamilies = "AF_UNIX AF_INET AF_INET6";
      PrivateUsers = "yes";
      ProtectSystem = "strict";
      ProtectHome = "read-only";
      PrivateDevices = "yes";
      PrivateMounts = "yes";
      ProtectKernelTunables = "yes";
      ProtectKernelModules = "yes";
      ProtectKernelLogs = "yes";
      ProtectControlGroups = "yes";
      ProtectClock = "yes";
      ProtectHostname = "yes";
      CapabilityBoundingSet = "";
    };

  socketMode = cfg: if grants cfg then "0666" else "0600";
  # Only for directories systemd itself creates on the way to the socket.
  directoryMode = cfg: if grants cfg then "0755" else "0700";

  # %t is /run/user/UID, mode 0700: no other user can reach a socket in it.
  warnings =
    cfg:
    lib.optional (grants cfg && lib.hasPrefix "%t/" cfg.socketPath)
      "services.ninep-harness: allowUids/allowGroups are set but socketPath (${cfg.socketPath}) is under %t (/run/user/UID, mode 0700), which other users cannot traverse: set socketPath to a directory they can reach.";
}
