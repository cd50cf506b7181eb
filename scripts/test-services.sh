#!/usr/bin/env bash
# Start throwaway PostgreSQL and Redis servers for the test suite, run a command against them,
# and stop them afterwards, whatever the command's outcome. Usage: test-services.sh CMD...
# Installs the servers with apt when missing (as root, as the suite runs here and in CI).
set -euo pipefail

need_apt=()
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
[[ -x "${pg_bin}/initdb" ]] || need_apt+=(postgresql)
command -v redis-server >/dev/null || need_apt+=(redis-server)
if ((${#need_apt[@]})); then
  echo "installing ${need_apt[*]} with apt-get" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
fi

work=$(mktemp -d /tmp/qm-test-services.XXXXXX)
chmod 755 "$work"
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
# Free ports chosen at start, so several suites (developers, CI) can run side by side.
pg_port=${QM_TEST_PG_PORT:-$(free_port)}
redis_port=${QM_TEST_REDIS_PORT:-$(free_port)}
pg_user=postgres
id "$pg_user" >/dev/null 2>&1 || pg_user=nobody
as_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u "$pg_user" -- "$@"; else "$@"; fi; }

cleanup() {
  as_pg "$pg_bin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
  [[ -f "$work/redis.pid" ]] && kill "$(cat "$work/redis.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p "$work/pg" "$work/sock"
touch "$work/pg.log"
chown -R "$pg_user" "$work/pg" "$work/sock" "$work/pg.log" 2>/dev/null || true
as_pg "$pg_bin/initdb" -D "$work/pg" -U qm --auth=trust -E UTF8 >/dev/null
cat >>"$work/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$work/sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 256MB
CONF
as_pg "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w start >/dev/null
"$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U qm quartermaster

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

export DATABASE_URL="postgres://qm@127.0.0.1:$pg_port/quartermaster"
export REDIS_URL="redis://127.0.0.1:$redis_port/0"
# With PostgreSQL and Redis the settings are a deployment's, which refuses to start without its
# own key and host names (docs/operations.md, Starting it): a fresh key per run, and the names
# the suite's servers and Django's test client are reached by.
export SECRET_KEY="${SECRET_KEY:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')}"
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-localhost,127.0.0.1,testserver}"
# Tests that restart the servers (chaos) need to know how.
export QM_TEST_PG_BIN="$pg_bin" QM_TEST_PG_DATA="$work/pg" QM_TEST_PG_USER="$pg_user" QM_TEST_PG_LOG="$work/pg.log"
export QM_TEST_REDIS_PORT="$redis_port" QM_TEST_SERVICES_DIR="$work"
set +e
"$@"
status=$?
set -e
exit $status
