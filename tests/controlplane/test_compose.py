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
            app = _import_target(args[args.index("-A") + 1])
            assert hasattr(app, "celery_app") or hasattr(app, "app"), f"{name}: no Celery app"
            assert args[args.index("-A") + 2] in {"worker", "beat"}
        elif program == "python":
            assert args[0] == "manage.py" and (ROOT / "manage.py").exists()
            from django.core.management import get_commands

            assert args[1] in get_commands(), f"{name}: unknown management command {args[1]}"
        elif program in scripts:
            assert callable(_import_target(scripts[program])), f"{name}: {scripts[program]} is not callable"
        else:
            raise AssertionError(f"service {name} runs {program!r}, which is no entry point of this project")
