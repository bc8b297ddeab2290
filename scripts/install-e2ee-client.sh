#!/usr/bin/env bash
# Installs the test suite's end-to-end encrypted Matrix client (tests/e2ee: matrix-js-sdk
# with its Rust crypto, pinned by its package-lock.json) into a cached folder, with the
# machine's Node.js and npm. Idempotent: a folder whose lock file matches is kept, and the
# client script is copied in fresh each time.
#
#   scripts/install-e2ee-client.sh [DEST]     (default: target/e2ee-client)
#
# Concurrent callers (several test binaries at once) serialize on a lock file in DEST.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tests/e2ee"
DEST="${1:-$ROOT/target/e2ee-client}"

mkdir -p "$DEST"
exec 9>"$DEST/.install.lock"
flock 9

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-e2ee-client: the encrypted-room tests need Node.js >= 20 and npm on PATH" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "install-e2ee-client: Node.js $(node --version) is too old; matrix-js-sdk 37 needs >= 20" >&2
  exit 1
fi

if ! cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json" || [ ! -d "$DEST/node_modules/matrix-js-sdk" ]; then
  echo "install-e2ee-client: installing matrix-js-sdk into $DEST" >&2
  rm -rf "$DEST/node_modules"
  cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
  (cd "$DEST" && npm ci --no-audit --no-fund --loglevel=error)
  echo "install-e2ee-client: done" >&2
fi
cp "$SRC/client.mjs" "$DEST/client.mjs"
