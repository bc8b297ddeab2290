#!/usr/bin/env bash
# Installs one pinned package from PyPI into a cached virtual environment, for the tests
# (Synapse, and the MCP SDK the test MCP server is written with). Idempotent: does
# nothing when the pinned version is already there.
#
#   scripts/install-pypi.sh VENV DIST VERSION
#
# Environment: PYTHON (default python3). Concurrent callers (several test binaries at
# once) serialize on a lock file next to the venv.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/python-venv.sh"

VENV="$1"
DIST="$2"
VERSION="$3"
PYTHON="${PYTHON:-python3}"

mkdir -p "$(dirname "$VENV")"
exec 9>"$(dirname "$VENV")/.install.lock"
flock 9

installed() {
  [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('$DIST'))" 2>/dev/null)" = "$VERSION" ]
}

if installed; then
  exit 0
fi

need_python_venv "install-pypi: $DIST"

echo "install-pypi: installing $DIST==$VERSION into $VENV" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$DIST==$VERSION"
installed || { echo "install-pypi: install finished but $DIST $VERSION is not there" >&2; exit 1; }
echo "install-pypi: done" >&2
