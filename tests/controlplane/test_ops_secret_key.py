"""Found by an SRE: a production deployment started without SECRET_KEY silently signed its
sessions with a key published in this repository (anyone could forge an admin's session), and
answered to any Host header. Each case starts a real process with a given environment, as
gunicorn, Celery or manage.py would."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED_DEMO_KEY = "quartermaster-insecure-demo-key-set-SECRET_KEY-in-production"
PROBE = ("import django; django.setup(); from django.conf import settings; "
         "print('KEY', settings.SECRET_KEY); print('HOSTS', ','.join(settings.ALLOWED_HOSTS))")


def _env(**values: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "DEBUG"}}
    env["DJANGO_SETTINGS_MODULE"] = "controlplane.settings"
    env["QM_LOG_FORMAT"] = "console"
    env.update({k: v for k, v in values.items() if v is not None})
    return env


def _start(**values: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE], env=_env(**values), cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def _probe(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("KEY ", "HOSTS ")))


POSTGRES = "postgres://qm@127.0.0.1:1/quartermaster"


def test_a_deployment_without_secret_key_refuses_to_start_and_says_how_to_make_one() -> None:
    for deployment in ({"DATABASE_URL": POSTGRES}, {"REDIS_URL": "redis://127.0.0.1:1/0"},
                       {"DATABASE_URL": POSTGRES, "REDIS_URL": "redis://127.0.0.1:1/0"}):
        done = _start(ALLOWED_HOSTS="qm.example.org", **deployment)
        assert done.returncode != 0, (deployment, done.stdout)
        assert "ImproperlyConfigured: SECRET_KEY is not set" in done.stderr, done.stderr[-2000:]
        assert "secrets.token_urlsafe(50)" in done.stderr
        assert PUBLISHED_DEMO_KEY not in done.stdout


def test_a_deployment_refuses_the_key_this_repository_used_to_publish() -> None:
    done = _start(DATABASE_URL=POSTGRES, SECRET_KEY=PUBLISHED_DEMO_KEY, ALLOWED_HOSTS="qm.example.org")
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is the demo's key published in this repository" in done.stderr


def test_a_deployment_without_allowed_hosts_refuses_to_start_naming_the_variable() -> None:
    done = _start(DATABASE_URL=POSTGRES, SECRET_KEY="k" * 50)
    assert done.returncode != 0
    assert "ImproperlyConfigured: ALLOWED_HOSTS is not set" in done.stderr, done.stderr[-2000:]


def test_a_configured_deployment_uses_its_own_key_and_hosts() -> None:
    got = _probe(_start(DATABASE_URL=POSTGRES, REDIS_URL="redis://127.0.0.1:1/0", SECRET_KEY="s3cret-" * 8,
                        ALLOWED_HOSTS=" qm.example.org, web ,"))
    assert got == {"KEY": "s3cret-" * 8, "HOSTS": "qm.example.org,web"}


def test_the_demo_runs_with_no_configuration_on_a_generated_key_and_says_so(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    first, second = _start(DATABASE_URL=sqlite), _start(DATABASE_URL=sqlite)
    keys = {_probe(first)["KEY"], _probe(second)["KEY"]}
    assert len(keys) == 2 and PUBLISHED_DEMO_KEY not in keys and all(len(k) >= 50 for k in keys)
    assert _probe(first)["HOSTS"] == "*"
    assert "SECRET_KEY is not set" in first.stderr and "demo" in first.stderr, first.stderr[-2000:]
    # DEBUG against PostgreSQL is a developer's machine, not a deployment.
    assert _probe(_start(DATABASE_URL=POSTGRES, DEBUG="1"))["KEY"] not in {"", PUBLISHED_DEMO_KEY}


def test_gunicorn_without_secret_key_does_not_serve_a_deployment() -> None:
    """The web as docker-compose would start it, forgetting SECRET_KEY: gunicorn's worker fails
    to boot with the reason in its log, and gunicorn exits instead of serving. Its log is JSON,
    gunicorn's own lines included (its config, controlplane/gunicorn_conf.py), but for the one
    line gunicorn prints itself with the boot error, which its JSON exception carries too."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "controlplane.wsgi:application",
         "-c", "python:controlplane.gunicorn_conf", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        env={name: value for name, value in _env(DATABASE_URL=POSTGRES, REDIS_URL="redis://127.0.0.1:1/0",
                                                 ALLOWED_HOSTS="localhost").items()
             if name != "QM_LOG_FORMAT"},  # a deployment's default: JSON
        cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise AssertionError("gunicorn kept running without SECRET_KEY:\n" + output[-3000:]) from None
    assert proc.returncode != 0
    assert "SECRET_KEY is not set" in output, output[-3000:]
    lines = output.splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    printed = [line for line in lines if not line.startswith("{")]
    assert printed == [next(r["exception"] for r in records if "exception" in r).splitlines()[-1].split(": ", 1)[1]]
    said = {(r["logger"], r["event"].split(" (pid")[0].split(" with pid")[0]) for r in records}
    assert {("gunicorn.error", "Booting worker"), ("gunicorn.error", "Exception in worker process"),
            ("gunicorn.error", "Reason: Worker failed to boot.")} <= said, said


def test_a_deployment_refuses_a_bootstrap_secret_short_enough_to_guess() -> None:
    """Found by the security audit (6 Dec): the agents' bootstrap secret registers a node, and a
    registered node is handed jobs, their commands and environments; the agent endpoints are
    open to the network and throttle nothing, so a short secret (`practice`, as the drill's demo
    uses) could be guessed from outside and a rogue node registered. A deployment now refuses one
    under 24 characters, naming the variable; unset (agents re-register with their node tokens)
    and the demo stay as they were."""
    common = {"DATABASE_URL": POSTGRES, "SECRET_KEY": "k" * 50, "ALLOWED_HOSTS": "qm.example.org"}
    done = _start(QM_AGENT_BOOTSTRAP_TOKEN="practice", **common)
    assert done.returncode != 0, done.stdout
    assert ("ImproperlyConfigured: QM_AGENT_BOOTSTRAP_TOKEN is 8 characters: a deployment's bootstrap secret "
            "needs at least 24") in done.stderr, done.stderr[-2000:]
    _probe(_start(QM_AGENT_BOOTSTRAP_TOKEN="x" * 24, **common))
    _probe(_start(**common))  # unset: no registration with a secret at all
    _probe(_start(QM_AGENT_BOOTSTRAP_TOKEN="practice"))  # the demo (SQLite, no Redis)
