#!/usr/bin/env bash
# Installs the pinned MCP Python SDK from PyPI into a cached virtual environment: the
# test MCP server (tests/fixtures/mcp_server.py) is written with it (see install-pypi.sh).
#
#   scripts/install-mcp.sh [VENV]     (default: target/mcp/venv)
#
# Environment: MCP_VERSION (default below: a 1.x SDK, which speaks protocol versions
# up to 2025-11-25, older than rmcp's newest: richbot must negotiate down).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec bash "$ROOT/scripts/install-pypi.sh" "${1:-$ROOT/target/mcp/venv}" mcp "${MCP_VERSION:-1.30.0}"
