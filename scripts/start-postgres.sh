#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the tests' PostgreSQL run (the `it_postgres` test
# binary) and prints its port once it accepts connections. Debian's `postgresql` package
# is installed with apt when no server binaries are found. The server runs as an
# unprivileged user (`postgres` when started by root), listens on 127.0.0.1 only, trusts
# local connections, skips fsync (the tests never pull the power; RICHBOT_PG_FSYNC=on keeps
# it, for the benchmark), and is stopped, its data removed, once PARENT_PID (the test
# process) has exited.
#
#   [RICHBOT_PG_FSYNC=on] scripts/start-postgres.sh PARENT_PID
set -euo pipefail
PARENT="$1"
FSYNC="${RICHBOT_PG_FSYNC:-off}"
case "$FSYNC" in on | off) ;; *) echo "start-postgres: RICHBOT_PG_FSYNC is on or off" >&2; exit 1 ;; esac

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

BIN="$(bindir)"
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  exec 9>/tmp/richbot-pg-install.lock
  flock 9
  BIN="$(bindir)"
  if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
    echo "start-postgres: installing postgresql (apt)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    BIN="$(bindir)"
  fi
  exec 9>&-
fi
[ -x "$BIN/initdb" ] || { echo "start-postgres: no PostgreSQL server binaries after installing" >&2; exit 1; }

DIR="$(mktemp -d /tmp/richbot-pg.XXXXXX)"
RUN=()
if [ "$(id -u)" = 0 ]; then
  # PostgreSQL refuses to run as root; Debian's package creates this user.
  chown postgres "$DIR"
  RUN=(runuser -u postgres --)
fi
"${RUN[@]}" "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --no-sync >"$DIR/initdb.log" 2>&1 ||
  { cat "$DIR/initdb.log" >&2; exit 1; }
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"${RUN[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/data/server.log" -w -t 60 \
  -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=$FSYNC -c full_page_writes=$FSYNC -c max_connections=400" \
  start >/dev/null || { cat "$DIR/data/server.log" >&2; exit 1; }

# The watchdog: the server lives as long as the test process.
STOP="${RUN[*]} $BIN/pg_ctl -D $DIR/data -m immediate stop"
nohup bash -c "while [ -d /proc/$PARENT ]; do sleep 1; done; $STOP >/dev/null 2>&1; rm -rf $DIR" >/dev/null 2>&1 &
echo "$PORT"
