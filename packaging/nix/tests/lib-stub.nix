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
