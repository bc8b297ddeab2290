#!/usr/bin/env bash
# Installs one pinned package from PyPI into a cached virtual environment, for the tests
# (Synapse, and the MCP SDK the test MCP server is written with). Idempotent: does
# nothing when the pinned version is already there. The environment itself lives in the
# test tools' cache (cache.sh), one per package, version and Python, and VENV is a link
# to it: a fresh clone reuses it instead of installing again (about 40 s for Synapse).
#
#   scripts/install-pypi.sh VENV DIST VERSION
#
# Environment: PYTHON (default python3), RICHBOT_TEST_CACHE (see cache.sh). Concurrent
# callers (several test binaries, or clones, at once) serialize on a lock file next to
# the environment.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/python-venv.sh"
. "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

LINK="$1"
DIST="$2"
VERSION="$3"
PYTHON="${PYTHON:-python3}"

mkdir -p "$(dirname "$LINK")"
exec 8>"$(dirname "$LINK")/.install.lock"
flock 8
VENV="$LINK"
py="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
cache="$(cached_dir "pypi/$DIST-$VERSION-py$py")"
if [ -n "$cache" ]; then
  VENV="$cache/venv"
  link_to_cache "$LINK" "$VENV"
  exec 9>"$cache/.install.lock"
  flock 9
fi

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
