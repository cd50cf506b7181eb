"""The engine's boundary, enforced mechanically: no Django, Celery, Redis, control plane or
HTTP client, no file/network/process I/O, no wall clock, no randomness. The AST of every engine
module is walked (the simulator ``scheduler_core/sim`` and ``scheduler_core/bench.py`` are
drivers around the engine that read traces and time runs; they are checked not to be imported
by the engine instead)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "scheduler_core"
DRIVERS = ("sim", "bench")

BANNED_MODULES = frozenset({
    "django", "celery", "redis", "controlplane", "frontend", "requests", "httpx", "urllib",
    "http", "socket", "ssl", "subprocess", "os", "io", "pathlib", "shutil", "tempfile", "glob",
    "sqlite3", "psycopg", "psycopg2", "pickle", "shelve", "json", "csv", "logging", "time",
    "datetime", "random", "secrets", "uuid", "threading", "multiprocessing", "asyncio",
    "concurrent", "signal", "resource", "sys",
} | set(DRIVERS) | {f"scheduler_core.{d}" for d in DRIVERS})
BANNED_CALLS = frozenset({"open", "print", "input", "exec", "eval", "compile", "__import__",
                          "breakpoint"})


def violations(source: str, name: str) -> list[str]:
    """Banned imports and calls in ``source``, as readable strings."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, name)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[0] in BANNED_MODULES or ".".join(parts[:2]) in BANNED_MODULES:
                found.append(f"{name}:{node.lineno} imports {module}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in BANNED_CALLS:
            found.append(f"{name}:{node.lineno} calls {node.func.id}()")
    return found


def engine_modules() -> list[Path]:
    files = []
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE)
        if rel.parts[0] in DRIVERS or rel.stem in DRIVERS:
            continue
        files.append(path)
    return files


def test_engine_has_modules_to_check():
    names = {p.name for p in engine_modules()}
    assert {"cycle.py", "types.py", "placement.py", "preemption.py"} <= names


@pytest.mark.parametrize("path", engine_modules(), ids=lambda p: str(p.relative_to(ENGINE)))
def test_engine_module_is_pure(path):
    assert violations(path.read_text(), str(path.relative_to(ENGINE))) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\n", "imports os"),
        ("from django.db import models\n", "imports django.db"),
        ("import time\nx = time.time()\n", "imports time"),
        ("from datetime import datetime\n", "imports datetime"),
        ("from scheduler_core.sim import loop\n", "imports scheduler_core.sim"),
        ("from scheduler_core import sim\n", "imports scheduler_core.sim"),
        ("f = open('x')\n", "calls open()"),
        ("print('hi')\n", "calls print()"),
    ],
    ids=["os", "django", "wall-clock", "datetime", "simulator-module", "simulator-package",
         "file-io", "stdout"],
)
def test_the_checker_catches_what_it_bans(source, expected):
    found = violations(source, "probe.py")
    assert any(expected in v for v in found), found


def test_the_checker_allows_relative_and_stdlib_math():
    assert violations("import math\nfrom collections.abc import Mapping\n"
                      "from scheduler_core.types import Plan\n", "ok.py") == []
