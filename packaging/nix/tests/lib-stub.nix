# A stub of exactly the nixpkgs `lib` functions the modules, package.nix
# and flake.nix use, with nixpkgs' semantics, so tests/eval.nix can
# evaluate them offline: there is no nixpkgs on the CI machine. Keep it to
# what the Nix files use; when they use something new, add it here (the
# eval fails with "attribute 'x' missing" until you do).
let
  inherit (builtins)
    all
    concatStringsSep
    isAttrs
    isBool
    isInt
    isList
    isString
    match
    stringLength
    substring
    ;

  isDerivation = x: isAttrs x && (x.type or null) == "derivation";
  # nixpkgs' lib.isStorePath, for strings: a direct child of the store.
  isStorePath =
    x: isString x && match "${builtins.storeDir}/[0-9a-z]{32}-[^/]+" x != null;

  mkOptionType =
    {
      name,
      description,
      check,
      nestedTypes ? { },
    }:
    {
      _type = "option-type";
      inherit name description check nestedTypes;
    };
in
rec {
  mkOption = attrs: attrs // { _type = "option"; };

  mkEnableOption =
    name:
    mkOption {
      type = types.bool;
      default = false;
      example = true;
      description = "Whether to enable ${name}.";
    };

  mkIf = condition: content: {
    _type = "if";
    inherit condition content;
  };

  mkOverride = priority: content: {
    _type = "override";
    inherit priority content;
  };
  mkDefault = mkOverride 1000;

  literalExpression = text: {
    _type = "literalExpression";
    inherit text;
  };

  types = {
    bool = mkOptionType {
      name = "bool";
      description = "boolean";
      check = isBool;
    };
    int = mkOptionType {
      name = "int";
      description = "signed integer";
      check = isInt;
    };
    str = mkOptionType {
      name = "str";
      description = "string";
      check = isString;
    };
    package = mkOptionType {
      name = "package";
      description = "package";
      check = x: isDerivation x || isStorePath x;
    };
    listOf =
      t:
      mkOptionType {
        name = "listOf";
        description = "list of ${t.description}";
        check = x: isList x && all t.check x;
        nestedTypes.elemType = t;
      };
    either =
      a: b:
      mkOptionType {
        name = "either";
        description = "${a.description} or ${b.description}";
        check = x: a.check x || b.check x;
        nestedTypes = {
          left = a;
          right = b;
        };
      };
  };

  optional = cond: x: if cond then [ x ] else [ ];
  optionalString = cond: s: if cond then s else "";
  inherit (builtins) head elem attrValues;
  filterAttrs =
    pred: set:
    builtins.listToAttrs (
      builtins.concatMap (
        name:
        let
          v = set.${name};
        in
        if pred name v then
          [
            {
              inherit name;
              value = v;
            }
          ]
        else
          [ ]
      ) (builtins.attrNames set)
    );
  mapAttrsToList = f: set: map (name: f name set.${name}) (builtins.attrNames set);
  makeBinPath = ps: concatStringsSep ":" (map (p: "${p}/bin") ps);
  versionAtLeast = v1: v2: builtins.compareVersions v1 v2 >= 0;
  versions.majorMinor =
    v:
    let
      parts = builtins.splitVersion v;
    in
    "${builtins.elemAt parts 0}.${builtins.elemAt parts 1}";

  licenses.mit = {
    spdxId = "MIT";
    shortName = "mit";
    fullName = "MIT License";
    url = "https://spdx.org/licenses/MIT.html";
    free = true;
    redistributable = true;
  };

  # home-manager's lib.hm (modules/lib/assertions.nix), which its modules
  # receive as lib.hm: the assertion its Linux-only modules make.
  hm.assertions.assertPlatform = module: pkgs: platforms: {
    assertion = builtins.elem pkgs.stdenv.hostPlatform.system platforms;
    message = "The module ${module} does not support your platform. It only supports\n${
      concatStringsSep "\n" (map (p: "  - ${p}") platforms)
    }";
  };
  concatMap = builtins.concatMap;
  inherit concatStringsSep;
  hasPrefix = pref: s: substring 0 (stringLength pref) s == pref;

  genAttrs =
    names: f:
    builtins.listToAttrs (
      map (n: {
        name = n;
        value = f n;
      }) names
    );

  # lib.fileset cannot be imitated without copying the tree into the store;
  # the stub keeps the arguments so eval.nix can check the files exist.
  fileset = {
    unions = paths: paths;
    toSource =
      { root, fileset }:
      {
        _type = "fileset-stub";
        inherit root fileset;
      };
  };

  platforms.linux = [
    "x86_64-linux"
    "aarch64-linux"
  ];
}
