#!/usr/bin/env bash
# Installs the pinned Synapse from PyPI into a cached virtual environment, for the
# end-to-end tests. Idempotent: does nothing when the pinned version is already there.
#
#   scripts/install-synapse.sh [VENV]     (default: target/synapse/venv)
#
# Environment: SYNAPSE_VERSION (default below), PYTHON (default python3).
# Concurrent callers (several test binaries at once) serialize on a lock file.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/target/synapse/venv}"
SYNAPSE_VERSION="${SYNAPSE_VERSION:-1.163.2}"
PYTHON="${PYTHON:-python3}"

mkdir -p "$(dirname "$VENV")"
exec 9>"$(dirname "$VENV")/.install.lock"
flock 9

installed() {
  [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("matrix-synapse"))' 2>/dev/null)" = "$SYNAPSE_VERSION" ]
}

if installed; then
  exit 0
fi

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "install-synapse: matrix-synapse needs Python >= 3.10" >&2; exit 1; }
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "install-synapse: installing python3-venv (apt)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

echo "install-synapse: installing matrix-synapse==$SYNAPSE_VERSION into $VENV" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "matrix-synapse==$SYNAPSE_VERSION"
installed || { echo "install-synapse: install finished but synapse $SYNAPSE_VERSION is not importable" >&2; exit 1; }
echo "install-synapse: done" >&2
