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
      # The package's version, and the daemon's --version: the commit the
      # flake was built from; a tree with uncommitted changes says so
      # (dirtyShortRev, Nix >= 2.16); a source without git metadata (a
      # path: or tarball flake) gets nixpkgs' form for unreleased code,
      # dated by its newest file; "dev" when even that is unknown.
      version =
        self.shortRev or self.dirtyShortRev or (
          if self ? lastModifiedDate then
            "0-unstable-${builtins.substring 0 4 self.lastModifiedDate}-${builtins.substring 4 2 self.lastModifiedDate}-${builtins.substring 6 2 self.lastModifiedDate}"
          else
            "dev"
        );
      # A module that defaults to this flake's package for the host. key
      # makes it one module however many names it is imported by: the
      # module system imports a key once, so a configuration that lists
      # both homeModules.default and homeManagerModules.default does not
      # declare the options twice.
      withPackage = name: module: {
        key = "ninep-harness#${name}";
        _file = "${toString ./flake.nix}#${name}";
        imports = [
          module
          (
            { lib, pkgs, ... }:
            {
              services.ninep-harness.package = lib.mkDefault self.packages.${pkgs.stdenv.hostPlatform.system}.default;
            }
          )
        ];
      };
      homeModule = withPackage "homeModules.default" ./hm-module.nix;
    in
    {
      packages = forAllSystems (pkgs: rec {
        ninep-harness = pkgs.callPackage ./package.nix { inherit version; };
        default = ninep-harness;
      });

      overlays.default = final: _prev: {
        ninep-harness = final.callPackage ./package.nix { inherit version; };
      };

      nixosModules.default = withPackage "nixosModules.default" ./nixos-module.nix;
      # home-manager's current name for the output, and the name it used
      # before: one module value under both.
      homeModules.default = homeModule;
      homeManagerModules.default = homeModule;
    };
}
