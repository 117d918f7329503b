# The 9harness package: bin/9harnessd, bin/9harness, their man pages, the
# polkit action and the journal catalog. callPackage-style; the flake passes the version.
{
  lib,
  buildGo126Module,
  version ? "dev",
}:
buildGo126Module {
  pname = "ninep-harness";
  inherit version;

  # Only what the build reads, so editing tests or docs does not rebuild.
  # A new top-level Go package directory must be added here.
  src = lib.fileset.toSource {
    root = ../..;
    fileset = lib.fileset.unions [
      ../../go.mod
      ../../go.sum
      ../../cmd
      ../../internal
      ../../packaging/polkit/org.ninep.harness.move.policy
      ../../packaging/systemd/9harness.catalog
      ../../packaging/man/9harness.1
      ../../packaging/man/9harnessd.8
    ];
  };

  # The NAR hash of `go mod vendor`'s output for go.mod/go.sum (nixpkgs'
  # go-modules derivation). After changing go.mod or go.sum, run
  #   packaging/nix/update-vendor-hash.sh
  # (test/nix_test.go fails until you do). Without Nix on the machine: set
  # vendorHash = lib.fakeHash, build once, and copy the "got:" hash here.
  vendorHash = "sha256-tkM5PFym+P6bgPvI59YWYrL1R9lAUIzonyRpS+1UVS8=";

  subPackages = [
    "cmd/9harnessd"
    "cmd/9harness"
  ];

  ldflags = [
    "-s"
    "-w"
    "-X main.version=${version}"
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
    install -Dm644 packaging/man/9harness.1 $out/share/man/man1/9harness.1
    install -Dm644 packaging/man/9harnessd.8 $out/share/man/man8/9harnessd.8
  '';

  meta = {
    description = "Read-only 9P2000.L file tree of AI-agent harness state, served per user";
    mainProgram = "9harnessd";
    platforms = lib.platforms.linux;
  };
}
