# home-manager module: services.ninep-harness.
#
# Writes ~/.config/systemd/user/9harness.{socket,service} and
# 9harness-proc.{socket,service} in home-manager's unit shape
# (Unit/Socket/Service/Install sections, as home-manager's own gpg-agent
# sockets do), the same units as packaging/systemd:
#
# - 9harness.socket has Install.WantedBy = [ "sockets.target" ];
# - 9harness.service, the daemon, has no Install section and is only ever
#   started by its socket. It exits after 5 minutes idle (--idle-exit 5m)
#   and the socket starts it again on the next connection. It runs
#   sandboxed inside a user namespace (PrivateUsers=yes, common.nix);
# - 9harness-proc.socket and 9harness-proc.service, the proc helper, which
#   answers the /proc reads the daemon's namespace forbids
#   (--proc-helper %t/9p/harness-proc). Its socket has no Install either:
#   the daemon's service requires it, and it is PartOf 9harness.socket.
#
# Linux only: an assertion names the module on any other platform.
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
    # Linux only, as the package (meta.platforms) and the units are: the
    # daemon reads /proc and needs a systemd user manager. home-manager's
    # own check, so a darwin home says which module and why.
    assertions = [
      (lib.hm.assertions.assertPlatform "services.ninep-harness" pkgs lib.platforms.linux)
    ];

    warnings = common.warnings cfg;

    home.packages = [ cfg.package ];

    systemd.user.sockets."9harness" = {
      Unit = {
        Description = common.descriptions.socket;
        Documentation = common.documentation;
      };
      Socket = {
        ListenStream = cfg.socketPath;
        SocketMode = common.socketMode cfg;
        DirectoryMode = common.directoryMode cfg;
        RemoveOnStop = common.removeOnStop;
      };
      Install.WantedBy = [ "sockets.target" ];
    };

    systemd.user.services."9harness" = {
      Unit = {
        Description = common.descriptions.service;
        Documentation = common.documentation;
        Requires = [
          common.socketUnit
          common.procSocketUnit
        ];
        After = [
          common.socketUnit
          common.procSocketUnit
        ];
      };
      Service = common.serviceConfig cfg;
      # No Install section: started only by its socket.
    };

    # The proc helper's socket stays in %t whatever socketPath is (see
    # common.nix, procSocketPath): only the daemon connects to it.
    systemd.user.sockets."9harness-proc" = {
      Unit = {
        Description = common.descriptions.procSocket;
        Documentation = common.documentation;
        PartOf = [ common.socketUnit ];
      };
      Socket = common.procSocketConfig // {
        ListenStream = common.procSocketPath;
      };
      # No Install section: 9harness.service requires it.
    };

    systemd.user.services."9harness-proc" = {
      Unit = {
        Description = common.descriptions.procService;
        Documentation = common.documentation;
        Requires = [ common.procSocketUnit ];
        After = [ common.procSocketUnit ];
      };
      Service = common.procServiceConfig cfg;
    };

    # The notifier, only with notify = true; it starts at login.
    systemd.user.services."9harness-notify" = lib.mkIf cfg.notify {
      Unit = {
        Description = common.notifyDescription;
        Documentation = common.notifyDocumentation;
        Wants = common.notifyWants;
        After = common.notifyAfter;
      };
      Service = common.notifyServiceConfig cfg;
      Install.WantedBy = common.notifyWantedBy;
    };
  };
}
