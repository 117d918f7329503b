# home-manager module: services.ninep-harness.
#
# Writes ~/.config/systemd/user/9harness.{socket,service} in
# home-manager's unit shape (Unit/Socket/Service/Install sections, as
# home-manager's own gpg-agent sockets do): the socket has
# Install.WantedBy = [ "sockets.target" ]; the service has no Install
# section and is only ever started by its socket. It exits after 5 minutes
# idle (--idle-exit 5m) and the socket starts it again on the next
# connection.
#
# The polkit action (--polkit) is system-wide and cannot come from a home
# configuration: install the package system-wide for that (see README.md).
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

    home.packages = [ cfg.package ];

    systemd.user.sockets."9harness" = {
      Unit.Description = common.description;
      Socket = {
        ListenStream = cfg.socketPath;
        SocketMode = common.socketMode cfg;
        DirectoryMode = common.directoryMode cfg;
        RemoveOnStop = true;
      };
      Install.WantedBy = [ "sockets.target" ];
    };

    systemd.user.services."9harness" = {
      Unit = {
        Description = common.description;
        Requires = [ "9harness.socket" ];
        After = [ "9harness.socket" ];
      };
      Service.ExecStart = common.execStart cfg;
      # No Install section: started only by its socket.
    };
  };
}
