"""docs/api.md shows every qm command: a command added without an example or a mention in
the docs fails here (`qm --help` lists them; the reference should too)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from controlplane.cli.main import build_parser

DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def test_cli_docs_name_every_qm_command():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"submit", "explain", "sprio", "showback"} <= set(commands)
    doc = DOC.read_text()
    unnamed = sorted(name for name in commands
                     if not re.search(r"(?<![\w-])qm " + re.escape(name) + r"\b", doc))
    assert unnamed == [], f"qm commands docs/api.md neither shows nor names: {unnamed}"
