# What the NixOS and the home-manager module share: the options under
# services.ninep-harness and the daemon's command line. Each module only
# shapes these into its own unit syntax.
#
# The attribute is `ninep-harness`, not `9harness`: a Nix identifier cannot
# start with a digit, so `services.9harness.enable` does not parse and every
# use would need quotes (`services."9harness".enable`). `ninep` is the
# project's own spelling of 9P elsewhere (the polkit action is
# org.ninep.harness.move). The systemd units keep their real name,
# 9harness.socket and 9harness.service, quoted where Nix needs it.
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

  # 9harnessd's arguments, in order.
  args =
    cfg:
    [
      "--audit"
      "auto"
      "--idle-exit"
      "5m"
    ]
    ++ lib.optional cfg.allowMove "--allow-move"
    ++ lib.concatMap (u: [
      "--allow-uid"
      (toString u)
    ]) cfg.allowUids
    ++ lib.concatMap (g: [
      "--allow-group"
      (toString g)
    ]) cfg.allowGroups
    ++ cfg.extraArgs;

  execStart =
    cfg: lib.concatStringsSep " " (map escapeArg ([ "${cfg.package}/bin/9harnessd" ] ++ args cfg));

  socketMode = cfg: if grants cfg then "0666" else "0600";
  # Only for directories systemd itself creates on the way to the socket.
  directoryMode = cfg: if grants cfg then "0755" else "0700";

  # %t is /run/user/UID, mode 0700: no other user can reach a socket in it.
  warnings =
    cfg:
    lib.optional (grants cfg && lib.hasPrefix "%t/" cfg.socketPath)
      "services.ninep-harness: allowUids/allowGroups are set but socketPath (${cfg.socketPath}) is under %t (/run/user/UID, mode 0700), which other users cannot traverse: set socketPath to a directory they can reach.";

  description = "9harness: read-only 9P2000.L view of AI-agent harness state";
}
