#!/usr/bin/env bash
# A throwaway PostgreSQL for the store tests (src/api/test-store.c).
#
#   tools/pg-test.sh start        starts it (or finds it running) and prints its URL
#   tools/pg-test.sh stop         stops it and deletes everything it wrote
#   tools/pg-test.sh url          prints the URL if it is running, fails otherwise
#   tools/pg-test.sh run CMD...   start, run CMD with SPACE_TEST_PG_URL set, stop
#
#   export SPACE_TEST_PG_URL=$(tools/pg-test.sh start)
#   meson test -C build --suite pg --print-errorlogs
#   tools/pg-test.sh stop
#
# The server listens on a Unix socket in its own directory and on no TCP
# port, so it cannot clash with another PostgreSQL or be reached from
# outside; authentication is "trust" over that socket, whose directory only
# the database user (and root) may enter. Durability is switched off: this
# data is thrown away. start and stop are idempotent. Run as root (initdb
# then runs as the "postgres" user, Debian's postgresql package creates it)
# or as any other user (everything then runs as that user).
#
# Each checkout (worktree) gets its own cluster: the default directory is
# /tmp/space-pg-test-$UID-<8 hex of the checkout's path>, so two checkouts
# testing at once never share a database, and one's stop never stops the
# other's server. Within one checkout, start is shared and stop is global.
# SPACE_PG_TEST_DIR overrides the directory; its path must stay short: a
# socket path has a 107-byte limit.
set -euo pipefail

checkout=$(cd "$(dirname "$0")/.." && pwd -P)
dir=${SPACE_PG_TEST_DIR:-/tmp/space-pg-test-$(id -u)-$(printf '%s' "$checkout" | sha256sum | cut -c1-8)}
data=$dir/data
port=5432
db=space_test

die() {
  echo "pg-test: $*" >&2
  exit 1
}

bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  done
  command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)" && return 0
  die "no PostgreSQL server binaries (install the postgresql package: tools/install-deps.sh)"
}

# The OS user that owns the cluster; initdb refuses to run as root.
if [ "$(id -u)" -eq 0 ]; then
  owner=postgres
  id "$owner" >/dev/null 2>&1 || die "user 'postgres' does not exist (install the postgresql package)"
  as_owner() { runuser -u "$owner" -- "$@"; }
else
  owner=$(id -un)
  as_owner() { "$@"; }
fi

url() {
  echo "postgresql:///$db?host=$dir&port=$port&user=$owner"
}

running() {
  [ -f "$data/PG_VERSION" ] && as_owner "$(bindir)/pg_ctl" status -D "$data" >/dev/null 2>&1
}

start() {
  local bin
  bin=$(bindir)
  if ! running; then
    # A directory left by a crash is reused if it holds a cluster, else rebuilt.
    if [ ! -f "$data/PG_VERSION" ]; then
      rm -rf "$dir"
      mkdir -p "$dir"
      chmod 700 "$dir"
      if [ "$(id -u)" -eq 0 ]; then
        chown "$owner:" "$dir"
      fi
      as_owner "$bin/initdb" -D "$data" --auth=trust --encoding=UTF8 --no-locale \
        --username="$owner" >"$dir/initdb.log" 2>&1 ||
        die "initdb failed, see $dir/initdb.log"
    fi
    as_owner "$bin/pg_ctl" start -w -t 60 -D "$data" -l "$dir/server.log" \
      -o "-c listen_addresses='' -c unix_socket_directories='$dir' -p $port \
          -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >&2 ||
      die "the server did not start, see $dir/server.log"
  fi
  if [ "$(as_owner "$bin/psql" -h "$dir" -p "$port" -d postgres -XAtc \
        "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
    as_owner "$bin/createdb" -h "$dir" -p "$port" "$db"
  fi
  url
}

stop() {
  if running; then
    as_owner "$(bindir)/pg_ctl" stop -w -D "$data" -m fast >&2
  fi
  rm -rf "$dir"
}

case "${1:-}" in
start)
  start
  ;;
stop)
  stop
  ;;
url)
  running || die "not running (tools/pg-test.sh start)"
  url
  ;;
run)
  shift
  [ $# -gt 0 ] || die "usage: pg-test.sh run CMD..."
  trap stop EXIT
  SPACE_TEST_PG_URL=$(start)
  export SPACE_TEST_PG_URL
  "$@"
  ;;
*)
  echo "usage: pg-test.sh start|stop|url|run CMD..." >&2
  exit 2
  ;;
esac
