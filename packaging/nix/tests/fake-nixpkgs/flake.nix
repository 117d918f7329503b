# A stand-in for the nixpkgs flake input, for checking flake.nix with the
# real flake machinery offline. Its lib is ../lib-stub.nix, copied next to
# this file (a path: flake cannot read outside its directory); its
# buildGoModule and the packages package.nix names are derivations that
# are never built. test/nix_test.go
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
          # A derivation that can be instantiated but never built.
          stub =
            name:
            derivation {
              inherit name system;
              builder = "/bin/sh";
              args = [
                "-c"
                "echo offline stand-in, not buildable; exit 1"
              ];
            };
          self = {
            stdenv.hostPlatform.system = system;
            go = stub "go-1.26.1" // {
              version = "1.26.1";
            };
            buildGoModule =
              a:
              stub "${a.pname}-${a.version}"
              // {
                inherit (a) meta version;
              };
            installShellFiles = stub "install-shell-files";
            makeWrapper = stub "make-wrapper";
            coreutils = stub "coreutils";
            gawk = stub "gawk";
            gnugrep = stub "gnugrep";
            gnused = stub "gnused";
            fzf = stub "fzf";
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
