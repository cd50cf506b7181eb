"""`qm` starts without the server's libraries: every command is one HTTP request, and until 3 Dec
each call first spent ~0.45 s importing Celery (and with it structlog, kombu and, where it is
installed, rich), because the `controlplane` package imported its Celery app for the Django
processes: `qm --help` took 0.85 s on the 2-core machine, 0.40 s without. The Django processes
import the app when Django starts (apps.ControlPlaneConfig.ready) instead."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SERVER_SIDE = ("celery", "kombu", "django", "rest_framework", "structlog", "redis", "psycopg")


def test_the_cli_imports_none_of_the_servers_libraries() -> None:
    probe = ("import json, sys; import controlplane.cli.main; "
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert not loaded & set(SERVER_SIDE), sorted(loaded & set(SERVER_SIDE))


def test_a_django_process_still_sends_tasks_through_the_configured_app() -> None:
    # the app Django's start made current is ours (its broker and routes), not Celery's default
    from celery import current_app

    from controlplane import tasks
    from controlplane.celery import app

    assert current_app._get_current_object() is app
    assert tasks.tick.app is app
    assert app.conf.task_routes["qm.tick"] == {"queue": "qm.loop"}
