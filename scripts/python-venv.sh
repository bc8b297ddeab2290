# Sourced by the install scripts: `need_python_venv WHO` checks that $PYTHON (default
# python3) is 3.10 or newer and can make a virtual environment, installing Debian's
# python3-venv when it cannot. WHO names the caller in its messages.
need_python_venv() {
  local who="$1" python="${PYTHON:-python3}"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    { echo "$who: needs Python >= 3.10" >&2; exit 1; }
  if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "$who: installing python3-venv (apt)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
}
