"""`qm notify history HOOK` at an 80-column terminal: a change of a hook's URL and events is one
sentence of 300 columns and more, printed on one line the terminal wrapped from its left edge,
under no column. Its CHANGE is now wrapped under its column as an event's WHAT is, every line
within the terminal, the sentence whole; `--wide` and a pipe keep it on its one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controlplane.models import NotificationHook

pytestmark = pytest.mark.slow

FIRST = "https://hooks.example.org/services/T000/B000/a-rather-long-slack-webhook-path"
SECOND = "https://hooks.example.org/services/T000/B000/another-rather-long-slack-webhook-path"


def test_a_long_change_is_wrapped_under_its_column(alice_qm: Callable[..., Any]) -> None:
    assert alice_qm("notify", "add", FIRST, "--events", "all").code == 0
    hook = NotificationHook.objects.get()
    assert alice_qm("notify", "edit", str(hook.pk), "--hook-url", SECOND, "--events", "fail").code == 0

    narrow = alice_qm("notify", "history", str(hook.pk), extra_env={"COLUMNS": "80"})
    wide = alice_qm("notify", "history", str(hook.pk), "--wide", extra_env={"COLUMNS": "80"})

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    assert max(len(line) for line in narrow.out.splitlines()) <= 80, narrow.out
    change = next(line.split("  alice  ")[1].strip() for line in wide.out.splitlines() if " changed: " in line)
    assert f"url {FIRST} → {SECOND}" in change
    at = narrow.out.splitlines()[0].index("CHANGE")
    under = "".join(line[at:].strip() for line in narrow.out.splitlines()[1:])
    assert "".join(change.split()) in "".join(under.split()), narrow.out  # every word of it, in order
    assert all(not line[:at].strip() or line[:4].isdigit() for line in narrow.out.splitlines()[1:]), narrow.out
