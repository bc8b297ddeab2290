#!/usr/bin/env bash
# Installs the pinned Synapse from PyPI into a cached virtual environment, for the
# end-to-end tests (see install-pypi.sh).
#
#   scripts/install-synapse.sh [VENV]     (default: target/synapse/venv)
#
# Environment: SYNAPSE_VERSION (default below), PYTHON (default python3).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec bash "$ROOT/scripts/install-pypi.sh" "${1:-$ROOT/target/synapse/venv}" matrix-synapse "${SYNAPSE_VERSION:-1.163.2}"
