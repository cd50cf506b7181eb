"""`qm --help` never calls anything "utilization" alone (DEVELOPERS.md: utilization is three
tiers, allocated × not stalled × productive). `qm showback` was "cost and utilization by team,
project, job or class" until 4 Dec; what it prints is GPU-hours allocated, active and
productive, and their cost."""

from __future__ import annotations

import argparse
import re

from controlplane.cli.main import build_parser


def _helps() -> dict[str, str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {"qm": parser.format_help()}
    helps.update({f"qm {name}": sub.format_help() for name, sub in commands.choices.items()})
    return helps


def test_no_qm_help_calls_anything_utilization_alone() -> None:
    alone = {name: text for name, text in _helps().items()
             if re.search(r"utili[sz]ation(?! in three tiers)", " ".join(text.split()), re.IGNORECASE)}
    assert alone == {}, sorted(alone)


def test_qm_showback_says_which_gpu_hours_it_shows() -> None:
    text = " ".join(_helps()["qm"].split())
    assert "showback cost and GPU-hours allocated, active and productive by team, project, job or class" in text
