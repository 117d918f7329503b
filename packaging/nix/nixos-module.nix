# NixOS module: services.ninep-harness.
#
# Declares four systemd *user* units (they land in /etc/systemd/user, for
# every user), the same as packaging/systemd:
#
# - 9harness.socket, wanted by sockets.target, so each user's manager
#   listens on %t/9p/harness from login on;
# - 9harness.service, the daemon, with no wantedBy of its own: only its
#   socket starts it. It exits after 5 minutes idle (--idle-exit 5m) and
#   the socket starts it again on the next connection. It runs sandboxed
#   inside a user namespace (PrivateUsers=yes, common.nix);
# - 9harness-proc.socket and 9harness-proc.service, the proc helper, which
#   answers the /proc reads the daemon's namespace forbids
#   (--proc-helper %t/9p/harness-proc). Nothing wants its socket: the
#   daemon's service requires it, and it is partOf 9harness.socket, so
#   stopping that stops it too.
#
# It also puts the package in environment.systemPackages: the 9harness
# client on PATH, and share/polkit-1/actions/org.ninep.harness.move.policy
# where polkitd reads actions (the polkit module links /share/polkit-1),
# which --polkit (extraArgs) needs.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  common = import ./common.nix { inherit lib; };
  cfg = config.services.ninep-harness;
in
{
  options.services.ninep-harness = common.options {
    defaultPackage = pkgs.ninep-harness or (pkgs.callPackage ./package.nix { });
    defaultPackageText = "pkgs.ninep-harness or (pkgs.callPackage ./package.nix { })";
  };

  config = lib.mkIf cfg.enable {
    warnings = common.warnings cfg;

    environment.systemPackages = [ cfg.package ];

    systemd.user.sockets."9harness" = {
      description = common.descriptions.socket;
      documentation = common.documentation;
      listenStreams = [ cfg.socketPath ];
      socketConfig = {
        SocketMode = common.socketMode cfg;
        DirectoryMode = common.directoryMode cfg;
        RemoveOnStop = common.removeOnStop;
      };
      wantedBy = [ "sockets.target" ];
    };

    systemd.user.services."9harness" = {
      description = common.descriptions.service;
      documentation = common.documentation;
      requires = [
        common.socketUnit
        common.procSocketUnit
      ];
      after = [
        common.socketUnit
        common.procSocketUnit
      ];
      serviceConfig = common.serviceConfig cfg;
      # No wantedBy: started only by its socket.
    };

    # The proc helper's socket stays in %t whatever socketPath is (see
    # common.nix, procSocketPath): only the daemon connects to it.
    systemd.user.sockets."9harness-proc" = {
      description = common.descriptions.procSocket;
      documentation = common.documentation;
      partOf = [ common.socketUnit ];
      listenStreams = [ common.procSocketPath ];
      socketConfig = common.procSocketConfig;
      # No wantedBy: 9harness.service requires it.
    };

    systemd.user.services."9harness-proc" = {
      description = common.descriptions.procService;
      documentation = common.documentation;
      requires = [ common.procSocketUnit ];
      after = [ common.procSocketUnit ];
      serviceConfig = common.procServiceConfig cfg;
    };

    # The notifier, only with notify = true; it starts at login.
    systemd.user.services."9harness-notify" = lib.mkIf cfg.notify {
      description = common.notifyDescription;
      documentation = common.notifyDocumentation;
      wants = common.notifyWants;
      after = common.notifyAfter;
      serviceConfig = common.notifyServiceConfig cfg;
      wantedBy = common.notifyWantedBy;
    };
  };
}
