# Sourced by the install scripts: `cached_dir KEY` prints a folder for KEY in the test
# tools' cache, shared by every clone on the machine so that a fresh clone does not
# download and build the same Synapse, MCP SDK and model server again: $RICHBOT_TEST_CACHE,
# else $XDG_CACHE_HOME/richbot-tests, else ~/.cache/richbot-tests. It prints nothing when
# no cache folder can be made (or RICHBOT_TEST_CACHE is "off"): the caller installs into
# its own folder then. An entry is only ever added, never changed: a new pinned version
# (or another machine's CPU, for what is built for it) is a new key.
cached_dir() {
  local root="${RICHBOT_TEST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/richbot-tests}"
  [ "$root" = "off" ] && return 0
  mkdir -p "$root/$1" 2>/dev/null && [ -w "$root/$1" ] && (cd "$root/$1" && pwd)
  return 0
}

# `link_to_cache LINK TARGET`: makes LINK (a path under target/) a symlink to TARGET,
# replacing what was there (an install of its own, from before the cache). The caller
# holds a lock beside LINK; the link is swapped in whole, never missing for a reader.
link_to_cache() {
  local link="$1" target="$2"
  [ "$(readlink "$link" 2>/dev/null)" = "$target" ] && return 0
  mkdir -p "$(dirname "$link")"
  [ -L "$link" ] || rm -rf "$link"
  ln -sfn "$target" "$link.new.$$"
  mv -T "$link.new.$$" "$link"
}

# `enter_install_dir LINK KEY`: the folder an install script fills, held for the rest of
# the script. Takes the lock beside LINK (fd 8), sets DIR to the cache's folder for KEY
# (LINK then links to it) or to LINK itself when there is no cache, creates it and takes
# its own lock (fd 9), so concurrent installers (several clones, several test binaries)
# wait for the first.
enter_install_dir() {
  local link="$1" key="$2" cache
  mkdir -p "$(dirname "$link")"
  exec 8>"$link.install.lock"
  flock 8
  DIR="$link"
  cache="$(cached_dir "$key")"
  if [ -n "$cache" ]; then
    DIR="$cache"
    link_to_cache "$link" "$DIR"
  fi
  mkdir -p "$DIR"
  exec 9>"$DIR/.install.lock"
  flock 9
}
