# NixOS module: services.ninep-harness.
#
# Declares 9harness.socket and 9harness.service as systemd *user* units
# (they land in /etc/systemd/user, for every user): the socket is wanted by
# sockets.target, so each user's manager listens on %t/9p/harness from
# login on; the service has no [Install] of its own and is only ever started
# by its socket. It exits after 5 minutes idle (--idle-exit 5m) and the
# socket starts it again on the next connection.
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
      description = common.description;
      listenStreams = [ cfg.socketPath ];
      socketConfig = {
        SocketMode = common.socketMode cfg;
        DirectoryMode = common.directoryMode cfg;
        RemoveOnStop = true;
      };
      wantedBy = [ "sockets.target" ];
    };

    systemd.user.services."9harness" = {
      description = common.description;
      requires = [ "9harness.socket" ];
      after = [ "9harness.socket" ];
      serviceConfig.ExecStart = common.execStart cfg;
      # No wantedBy: started only by its socket.
    };
  };
}
