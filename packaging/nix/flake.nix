{
  description = "9harness: a read-only 9P2000.L view of AI-agent harness state, per user";

  # No flake.lock is committed (it was written on a machine without
  # network): `nix flake lock` writes one on first use.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  # This flake lives in packaging/nix of the repository: refer to it as
  #   git+file:///path/to/9harness?dir=packaging/nix
  #   github:9harness/9harness?dir=packaging/nix
  # so the whole repository is its source (package.nix builds ../..).
  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      version = self.shortRev or "dirty";
      # The modules, defaulting to this flake's package for the host.
      withPackage =
        module:
        { lib, pkgs, ... }:
        {
          imports = [ module ];
          services.ninep-harness.package = lib.mkDefault self.packages.${pkgs.stdenv.hostPlatform.system}.default;
        };
    in
    {
      packages = forAllSystems (pkgs: rec {
        ninep-harness = pkgs.callPackage ./package.nix { inherit version; };
        default = ninep-harness;
      });

      overlays.default = final: _prev: {
        ninep-harness = final.callPackage ./package.nix { inherit version; };
      };

      nixosModules.default = withPackage ./nixos-module.nix;
      homeManagerModules.default = withPackage ./hm-module.nix;
    };
}
