"""The suite's longest files start first, so no worker ends the run alone with one of them.

`make test` spreads whole files over pytest-xdist workers (``--dist loadfile``) in the order they
are collected, and tests/frontend/ is collected last: a 3-minute browser file handed out at the
end ran on one worker while the others sat idle. Longest first is the classic fix for that
(LPT scheduling). The list is by measurement (a 3-worker run's per-file times, junit XML), not
exhaustive; a file missing from it only runs in its collected place. Loaded with ``-p``
(pyproject's addopts); a serial run is reordered the same way, harmlessly.
"""

from __future__ import annotations

import pytest

#: Files whose tests took over ~60 s in all on a 3-worker run (2026-12-01), longest first. The
#: figures marked "est." are that run's times scaled by the file's own before/after ratio alone
#: (2026-12-02: qm calls forked from one process, tests/controlplane/cli/qm_forkserver.py); the
#: showback cost chart (177 s: its data is now built once per file), test_admin_stale_form (86 s:
#: PBKDF2 at test rounds) and test_cli_hold (82 s, est. ~55 s) fell off the list.
LONGEST_FIRST = (
    "tests/controlplane/api/test_api_schema_fuzz.py",  # 481 s: four roles x every operation
    "tests/frontend/test_browser_pages.py",  # 186 s
    "tests/controlplane/cli/test_qm_researcher_paths.py",  # 195 s before, est. ~100 s
    "tests/controlplane/accounting/test_demo_tiers.py",  # 89 s: the demo fleet on SQLite for a minute
    "tests/controlplane/accounting/test_accounting_old_price_corrections.py",  # 85 s
    "tests/controlplane/cli/test_cli_history.py",  # 109 s before, est. ~78 s
    "tests/controlplane/cli/test_qm_cli.py",  # 130 s before, est. ~65 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)
    # sorted() is stable: the other files, and the tests inside every file, keep their order
    items[:] = sorted(items, key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
