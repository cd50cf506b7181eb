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

#: Files whose tests took over ~16 s in all on a 3-worker run, longest first. The figures are two
#: runs of 2026-12-02 averaged on one scale: 13:00 (22:54 at a load average of 6.4 from other work
#: on the machine) times 0.65, the ratio of the same files' sums between the two, and 13:47 (15:09
#: at load 4.6); the files that build their rows once per file since (tests/controlplane/
#: built_once.py: the history page and totals, ~70 s each before, now under 16 s, and the old
#: price corrections) by the second alone. Files further down the suite's order (tests/frontend/
#: is collected last) matter most here: one of ~30 s handed out last can run alone at the end.
LONGEST_FIRST = (
    "tests/frontend/test_browser_pages.py",  # 157 s
    # the schema fuzz in parts (tests/controlplane/api/schema_fuzz.py), one file each since 6 Dec,
    # by their share of a 6 Dec run at a load of 5 to 17 (36 min), put on this scale by
    # test_browser_pages.py's (490 s there): 433, 394, 353, 77 and 17 s
    "tests/controlplane/api/test_api_schema_fuzz_jobs.py",  # ~140 s
    "tests/controlplane/api/test_api_schema_fuzz_prices_and_hooks.py",  # ~125 s
    "tests/controlplane/api/test_api_schema_fuzz_teams.py",  # ~115 s
    "tests/controlplane/accounting/test_demo_tiers.py",  # 58 s: the demo fleet on SQLite for a minute
    "tests/controlplane/cli/test_cli_history.py",  # 50 s
    "tests/controlplane/cli/test_qm_researcher_paths.py",  # 42 s
    "tests/frontend/test_page_access.py",  # 37 s
    "tests/frontend/test_pages_accessible_browser.py",  # ~35 s, estimated (a minute under load)
    "tests/frontend/test_admin_accessible_browser.py",  # ~35 s, estimated (a minute under load)
    "tests/frontend/test_showback_cost_chart.py",  # 36 s
    "tests/controlplane/accounting/test_accounting_properties.py",  # 35 s
    "tests/frontend/test_operator_cordon_reason_browser.py",  # 34 s
    "tests/controlplane/accounting/test_accounting_old_price_corrections.py",  # 33 s, 73 s before built_once
    "tests/frontend/test_researcher_change_browser.py",  # 32 s
    "tests/frontend/test_researcher_form_roles_browser.py",  # 31 s
    "tests/controlplane/cli/test_qm_cli.py",  # 28 s
    "tests/frontend/test_job_page_output_ranks.py",  # 28 s
    "tests/controlplane/api/test_api_roles.py",  # 28 s
    "tests/frontend/test_researcher_job_runs_browser.py",  # 25 s
    "tests/controlplane/api/test_api_schema_fuzz_nodes.py",  # ~25 s (the same run)
    "tests/controlplane/test_dependency_resolution.py",  # 24 s
    "tests/frontend/test_researcher_requeue_browser.py",  # 21 s
    "tests/frontend/test_researcher_form_dependencies_browser.py",  # 20 s
    "tests/controlplane/test_cohort_audit.py",  # 18 s
    "tests/controlplane/api/test_api_schema_fuzz_rest.py",  # ~18 s estimated (17 s in the same run)
    "tests/controlplane/loop/test_preemption_budget_counts_preemptions_only.py",  # 17 s
    "tests/controlplane/cli/test_qm_journey_flags.py",  # 17 s
    "tests/controlplane/test_migration_0022_hold_reason.py",  # 17 s
    "tests/controlplane/test_admin_two_admins_in_chromium.py",  # 17 s
    "tests/controlplane/loop/test_beat_runs_the_loop_without_broker.py",  # 17 s
    "tests/controlplane/test_notification_hooks.py",  # 17 s
    "tests/controlplane/api/test_api_job_runs.py",  # 16 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)
    # sorted() is stable: the other files, and the tests inside every file, keep their order
    items[:] = sorted(items, key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
