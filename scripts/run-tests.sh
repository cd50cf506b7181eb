#!/usr/bin/env bash
# The whole suite as `make test` runs it, inside scripts/test-services.sh. Usage: run-tests.sh PYTHON [PYTEST ARGS...]
# With no pytest arguments: every test but the chaos ones on three workers (pytest-xdist; a file's
# tests stay on one worker: --dist loadfile), each with its own PostgreSQL test database (copied
# from one a single worker migrated) and Redis database (tests/xdist_isolation.py). Three on two
# cores: about half the suite's time is spent waiting on live servers, agents, browsers and
# subprocesses (11:39 against 15:23 on two workers; four were slower again: 15:54 against 14:50
# on three, side by side on 3 Dec).
# Files go out in collected order, the longest first (tests/xdist_order.py), not xdist's default
# (most tests first), which handed the longest file, the schema fuzz (then 8 min under load), out late.
# The fuzz is five files since 6 Dec (tests/controlplane/api/schema_fuzz.py): as one, 8-9 min under
# load on one worker, it was the run's long pole whatever the order.
# Then the chaos tests alone, since they restart the PostgreSQL and Redis the workers share.
# With arguments: one pytest process with exactly those.
set -uo pipefail
py=$1
shift
# Bytecode is written (to the ignored __pycache__ directories) even where the environment asks
# Python not to: without it every worker recompiled and assertion-rewrote all the test modules (475 then, 910 on 8 Dec) to
# collect them (24 s each, 5 s with the cache), and every subprocess a test starts (servers, agents,
# Celery workers, `qm`) compiled the product afresh.
unset PYTHONDONTWRITEBYTECODE
if (($#)); then
  exec "$py" -m pytest "$@"
fi
workers=${QM_TEST_WORKERS:-3}
# One id for both pytests: the chaos run makes its database from the migrated one the workers
# made theirs from, instead of running every migration again (tests/xdist_isolation.py).
QM_TEST_RUN=$("$py" -c 'import uuid; print(uuid.uuid4().hex)')
export QM_TEST_RUN
# The workers list the files holding the chaos tests they leave out (tests/xdist_isolation.py): the
# serial run collects those, not the whole suite again; the whole suite if the list is missing.
QM_TEST_SERIAL_FILES=$(mktemp)
export QM_TEST_SERIAL_FILES
trap 'rm -f "$QM_TEST_SERIAL_FILES"' EXIT
# --durations: the run's slowest tests, in every log (CI's too), for the suite's time to be watched.
"$py" -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder -m "not chaos" --durations=25
first=$?
mapfile -t chaos_files <"$QM_TEST_SERIAL_FILES"
"$py" -m pytest -m chaos "${chaos_files[@]}"
second=$?
echo "run-tests: on $workers workers without the chaos tests: exit $first; the chaos tests alone: exit $second" >&2
# pytest's 5 (nothing collected) is a failure here too: the suite always has chaos tests
((first == 0 && second == 0))
