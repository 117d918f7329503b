# The 9harness package: bin/9harnessd, bin/9harness, bin/zmxify, their man
# pages, the shell completions, the polkit action and the journal catalog.
# callPackage-style; the flake passes the version.
{
  lib,
  go,
  buildGoModule,
  # Only for a nixpkgs whose default Go is older than go.mod's go line.
  buildGo126Module ? null,
  installShellFiles,
  makeWrapper,
  coreutils,
  gawk,
  gnugrep,
  gnused,
  fzf,
  version ? "dev",
}:
let
  # go.mod's go line is the oldest Go that builds this: nixpkgs runs Go
  # with GOTOOLCHAIN=local, so an older one fails instead of fetching a
  # newer toolchain. buildGoModule (nixpkgs' default Go) is used when it is
  # new enough, so the package follows nixpkgs' Go updates and survives the
  # removal of the versioned builders; buildGo126Module only when the
  # default is older (a nixpkgs from before its switch to Go 1.26).
  goMin = lib.head (builtins.match ".*\ngo ([0-9.]+)\n.*" (builtins.readFile ../../go.mod));
  buildGo =
    if lib.versionAtLeast go.version goMin then
      buildGoModule
    else if buildGo126Module != null && lib.versions.majorMinor goMin == "1.26" then
      buildGo126Module
    else
      throw "ninep-harness needs Go >= ${goMin}; this nixpkgs' default Go is ${go.version}";

  # The shell completions (packaging/completions), by shell, relative to
  # the source root; each is installed when the checkout has it.
  completions = lib.filterAttrs (_: f: builtins.pathExists (../.. + "/${f}")) {
    bash = "packaging/completions/9harness.bash";
    zsh = "packaging/completions/_9harness";
    fish = "packaging/completions/9harness.fish";
  };
in
buildGo {
  pname = "ninep-harness";
  inherit version;

  # Only what the build reads, so editing tests or docs does not rebuild.
  # A new top-level Go package directory must be added here.
  src = lib.fileset.toSource {
    root = ../..;
    fileset = lib.fileset.unions (
      [
        ../../go.mod
        ../../go.sum
        ../../cmd
        ../../internal
        ../../contrib/zmxify
        ../../packaging/polkit/org.ninep.harness.move.policy
        ../../packaging/systemd/9harness.catalog
        ../../packaging/man/9harness.1
        ../../packaging/man/9harnessd.8
      ]
      ++ map (f: ../.. + "/${f}") (lib.attrValues completions)
    );
  };

  # The NAR hash of `go mod vendor`'s output for go.mod/go.sum (nixpkgs'
  # go-modules derivation). go.mod replaces hugelgupf/p9 with the fork in
  # internal/ninep/p9fork, which `go mod vendor` copies into vendor/, so
  # editing the fork changes this hash too. After changing go.mod, go.sum
  # or the fork, run
  #   packaging/nix/update-vendor-hash.sh
  # (test/nix_test.go fails until you do). Without Nix on the machine: set
  # vendorHash = lib.fakeHash, build once, and copy the "got:" hash here.
  vendorHash = "sha256-EZOWgd0XpZQDp9GOKPxI+JalTC1Q1xFyF7bl422wXfU=";

  subPackages = [
    "cmd/9harnessd"
    "cmd/9harness"
  ];

  ldflags = [
    "-s"
    "-w"
    "-X main.version=${version}"
  ];

  nativeBuildInputs = [
    installShellFiles
    makeWrapper
  ];

  # The project's tests need root, diod, a real journald and polkitd
  # (make test / .ci/run); none of that exists in the build sandbox.
  doCheck = false;

  postInstall = ''
    install -Dm644 packaging/polkit/org.ninep.harness.move.policy \
      $out/share/polkit-1/actions/org.ninep.harness.move.policy
    install -Dm644 packaging/systemd/9harness.catalog \
      $out/lib/systemd/catalog/9harness.catalog
    # The units' Documentation=man:9harnessd(8).
    installManPage packaging/man/9harness.1 packaging/man/9harnessd.8
  ''
  + lib.optionalString (completions != { }) ''
    installShellCompletion --cmd 9harness ${
      lib.concatStringsSep " " (lib.mapAttrsToList (shell: f: "--${shell} ${f}") completions)
    }
  ''
  + ''
    # The fzf picker: a shell script that runs this package's 9harness
    # (NINEHARNESS, unless the user sets another) and the tools it names;
    # zmx stays the user's own, from PATH.
    install -Dm755 contrib/zmxify $out/bin/zmxify
    wrapProgram $out/bin/zmxify \
      --set-default NINEHARNESS $out/bin/9harness \
      --prefix PATH : ${
        lib.makeBinPath [
          coreutils
          gawk
          gnugrep
          gnused
          fzf
        ]
      }
  '';

  meta = {
    description = "Read-only 9P2000.L file tree of AI-agent harness state, served per user";
    homepage = "https://github.com/9harness/9harness";
    license = lib.licenses.mit;
    mainProgram = "9harnessd";
    platforms = lib.platforms.linux;
  };
}
