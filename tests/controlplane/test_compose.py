"""No Docker engine runs here, so check the production stack's wiring instead: every service's
command must resolve to a real entry point of this project."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _console_scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _import_target(target: str) -> object:
    module, _, attribute = target.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def test_compose_has_the_production_services_with_health_checks() -> None:
    services = _compose()["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "agent"} <= set(services)
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert "pgdata" in _compose()["volumes"]


def test_every_compose_command_resolves_to_a_project_entry_point() -> None:
    scripts = _console_scripts()
    for name, service in _compose()["services"].items():
        command = service.get("command")
        if name in {"postgres", "redis"}:
            continue
        assert command, f"service {name} has no command"
        program, args = command[0], command[1:]
        if program == "gunicorn":
            assert callable(_import_target(args[0]))
        elif program == "celery":
            # found as `celery -A` finds it
            from celery import Celery
            from celery.app.utils import find_app

            assert isinstance(find_app(args[args.index("-A") + 1]), Celery), f"{name}: no Celery app"
            # the subcommand, after the global options (`--quiet`: no start banner on stdout)
            subcommand = next(a for a in args[args.index("-A") + 2:] if not a.startswith("-"))
            assert subcommand in {"worker", "beat"}, f"{name}: {command}"
        elif program == "python":
            assert args[0] == "manage.py" and (ROOT / "manage.py").exists()
            from django.core.management import get_commands

            assert args[1] in get_commands(), f"{name}: unknown management command {args[1]}"
        elif program in scripts:
            assert callable(_import_target(scripts[program])), f"{name}: {scripts[program]} is not callable"
        else:
            raise AssertionError(f"service {name} runs {program!r}, which is no entry point of this project")


def _option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


# Threads a web process keeps for the API (submits, heartbeats, reports, pages) beyond the agents'
# long polls it may hold: docs/operations.md, The web service.
API_THREADS = 8


def test_the_web_holds_the_agents_long_polls_with_threads_to_spare() -> None:
    """Found by an SRE: the web ran gunicorn's sync workers (one request at a time) without
    QM_AGENT_MAX_WAITS, so each agent's ~20 s wake-up wait took a whole worker and a handful of
    agents starved the API. Its worker class, threads and the waits cap must agree."""
    compose = _compose()
    web = compose["services"]["web"]
    args = web["command"][1:]
    environment = {**compose["x-app"]["environment"], **(web.get("environment") or {})}
    worker_class = _option(args, "-k", "--worker-class")
    threads = int(_option(args, "--threads") or 1)
    workers = int(_option(args, "-w", "--workers") or 1)
    max_waits = int(environment.get("QM_AGENT_MAX_WAITS", 2))  # the settings' default when unset

    assert worker_class == "gthread", f"web runs {worker_class or 'sync'} workers: a long poll takes a whole process"
    assert "QM_AGENT_MAX_WAITS" in environment, "the waits cap must be set with the thread count, not left to default"
    assert threads >= max_waits + API_THREADS, (threads, max_waits)
    # Connections do not spread evenly over processes: room for twice the agent processes compose runs.
    agents = sum(1 for service in compose["services"].values() if service.get("command", [""])[0] == "qm-agent")
    assert workers * max_waits >= 2 * agents and max_waits >= 4, (workers, max_waits, agents)


def test_every_long_running_service_is_restarted_if_it_exits_and_migrate_runs_once() -> None:
    """A worker that dies (OOM, a crash) comes back without an operator: until 2 Dec no service
    had a restart policy, so a loop worker killed stayed down until someone noticed, and a Celery
    worker exits with status 0 on some errors, which `on-failure` would not restart."""
    services = _compose()["services"]
    for name, service in services.items():
        expected = "no" if name == "migrate" else "unless-stopped"
        assert str(service.get("restart")) == expected, (name, service.get("restart"))


def test_the_processes_start_only_once_migrate_has_run_to_its_end() -> None:
    """New code on an old schema fails every cycle (`column … does not exist`; docs/operations.md,
    Upgrading a running system). Until 2 Dec `docker compose up` started migrate and the
    processes side by side."""
    services = _compose()["services"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name, service in services.items():
        if name in {"postgres", "redis", "migrate"}:
            continue
        assert service["depends_on"].get("migrate") == {"condition": "service_completed_successfully"}, name
