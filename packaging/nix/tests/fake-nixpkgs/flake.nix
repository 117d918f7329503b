# A stand-in for the nixpkgs flake input, for checking flake.nix with the
# real flake machinery offline. Its lib is ../lib-stub.nix, copied next to
# this file (a path: flake cannot read outside its directory); its
# buildGo126Module makes a derivation that is never built. test/nix_test.go
# (TestNixFlakeCheck) does, in a temporary directory:
#
#   cp lib-stub.nix fake-nixpkgs/
#   nix flake check --no-build 'git+file://REPO?dir=packaging/nix' \
#     --override-input nixpkgs path:fake-nixpkgs --no-write-lock-file
{
  outputs =
    _:
    let
      lib = import ./lib-stub.nix;
      pkgs =
        system:
        let
          self = {
            stdenv.hostPlatform.system = system;
            buildGo126Module =
              a:
              derivation {
                name = "${a.pname}-${a.version}";
                inherit system;
                builder = "/bin/sh";
                args = [
                  "-c"
                  "echo offline stand-in, not buildable; exit 1"
                ];
              }
              // {
                inherit (a) meta;
              };
            callPackage =
              fn: args:
              let
                f = import fn;
              in
              f (builtins.intersectAttrs (builtins.functionArgs f) (self // { inherit lib; }) // args);
          };
        in
        self;
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs [
        "x86_64-linux"
        "aarch64-linux"
      ] pkgs;
    };
}
