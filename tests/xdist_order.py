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

#: Files whose tests took over ~80 s in all on a 3-worker run (2026-12-01), longest first.
LONGEST_FIRST = (
    "tests/controlplane/api/test_api_schema_fuzz.py",  # 481 s: four roles x every operation
    "tests/controlplane/cli/test_qm_researcher_paths.py",  # 195 s
    "tests/frontend/test_browser_pages.py",  # 186 s
    "tests/frontend/test_showback_cost_chart.py",  # 177 s
    "tests/controlplane/cli/test_qm_cli.py",  # 130 s
    "tests/controlplane/cli/test_cli_history.py",  # 109 s
    "tests/controlplane/accounting/test_demo_tiers.py",  # 89 s: the demo fleet on SQLite for a minute
    "tests/controlplane/test_admin_stale_form.py",  # 86 s
    "tests/controlplane/accounting/test_accounting_old_price_corrections.py",  # 85 s
    "tests/controlplane/cli/test_cli_hold.py",  # 82 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)
    # sorted() is stable: the other files, and the tests inside every file, keep their order
    items[:] = sorted(items, key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
