#!/usr/bin/env bash
# Developer tool: shows one message of each kind richbot sends (every block type, a poll,
# plain Markdown) in a real Matrix client, nheko from Debian, under Xvfb, in a clear DM
# and in an encrypted one, and saves a screenshot after each (tests/showcase). It brings
# up the test suite's Synapse, richbot and the scripted model; nothing else is needed.
#
#   scripts/screenshots.sh [OUT]      (default: target/screenshots)
#   SHOWCASE_ONLY=chart,card scripts/screenshots.sh    (only those kinds)
#
# Installs nheko, Xvfb, xdotool, ImageMagick and a keyring with apt-get when they are
# missing (as root, or with sudo). Not part of `cargo test`; it takes 5-10 minutes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/target/screenshots}")"

need=()
for tool in nheko Xvfb xdotool import xdpyinfo dbus-run-session gnome-keyring-daemon; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "screenshots: installing what is missing (${need[*]})" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends \
    nheko xvfb x11-utils imagemagick xdotool fonts-dejavu-core fonts-noto-color-emoji dbus-x11 gnome-keyring
fi

mkdir -p "$OUT"
cd "$ROOT"
# nheko 0.11 fetches media only without authentication: the suite's Synapse allows it here.
RICHBOT_SYNAPSE_LEGACY_MEDIA=1 SHOWCASE_OUT="$OUT" cargo test --test showcase
