#!/usr/bin/env bash
# Starts llama-server on a model, asks it one thing with a known answer, and stops it: a
# server that cannot run here, or whose CPU backend computes garbage (built with AVX-512
# on a Xeon VM, see install-llama.sh), fails the install that calls this, not the tests.
#
#   scripts/llama-smoke.sh WHO SERVER MODEL LOG KIND PROMPT EXPECTED [SERVER ARGS...]
#
# KIND is `completion` (PROMPT continued, greedy) or `chat` (PROMPT asked as a member's
# message, with the model's own template); the answer must contain EXPECTED. WHO names the
# calling script in messages. Uses PYTHON (default python3).
set -euo pipefail
who="$1" server_bin="$2" model="$3" log="$4" kind="$5" prompt="$6" expected="$7"
shift 7
PYTHON="${PYTHON:-python3}"
port="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server_bin" -m "$model" --host 127.0.0.1 --port "$port" -c 512 -np 1 "$@" >"$log" 2>&1 &
server=$!
"$PYTHON" - "$port" "$who" "$kind" "$prompt" "$expected" <<'PY' || { kill "$server" 2>/dev/null; tail -5 "$log" >&2; exit 1; }
import json, sys, time, urllib.request
port, who, kind, prompt, expected = sys.argv[1:6]
base = f"http://127.0.0.1:{port}"
deadline = time.time() + 120
while True:
    try:
        urllib.request.urlopen(base + "/health", timeout=5)
        break
    except Exception:
        if time.time() > deadline:
            sys.exit(f"{who}: llama-server did not come up")
        time.sleep(0.5)
if kind == "completion":
    body = {"prompt": prompt, "n_predict": 4, "temperature": 0}
    path, answer_of = "/completion", lambda a: a.get("content") or ""
else:
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 16}
    path, answer_of = "/v1/chat/completions", lambda a: a["choices"][0]["message"].get("content") or ""
request = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
answer = answer_of(json.load(urllib.request.urlopen(request, timeout=300)))
if expected not in answer:
    sys.exit(f"{who}: llama-server's CPU backend computes garbage here: asked {prompt!r}, got {answer!r}")
PY
kill "$server"
wait "$server" 2>/dev/null || true
