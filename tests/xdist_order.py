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

#: Files whose tests took over ~25 s in all on a 3-worker run, longest first: the figures are
#: the run of 2026-12-02 13:00 (3,670 tests in 22:54 at a load average of ~6 from other work on
#: the machine, so about 1.7 times a quiet run's). Three files marked "was" build their rows once
#: per file since that run (tests/controlplane/built_once.py), their new place by the ratio
#: measured side by side. Files further down the suite's order (tests/frontend/ is collected
#: last) matter most here: one of ~50 s handed out last can run alone at the end.
LONGEST_FIRST = (
    "tests/controlplane/api/test_api_schema_fuzz.py",  # 444 s: four roles x every operation
    "tests/frontend/test_browser_pages.py",  # 178 s
    "tests/controlplane/accounting/test_accounting_rollup_runs.py",  # 73 s, one test of 72 s
    "tests/controlplane/accounting/test_demo_tiers.py",  # 68 s: the demo fleet on SQLite for a minute
    "tests/controlplane/cli/test_cli_history.py",  # 66 s
    "tests/controlplane/cli/test_qm_researcher_paths.py",  # 62 s
    "tests/frontend/test_page_access.py",  # 61 s
    "tests/frontend/test_researcher_form_roles_browser.py",  # 54 s
    "tests/frontend/test_showback_cost_chart.py",  # 52 s
    "tests/frontend/test_operator_cordon_reason_browser.py",  # 49 s
    "tests/frontend/test_researcher_change_browser.py",  # 49 s
    "tests/controlplane/accounting/test_accounting_old_price_corrections.py",  # was 73 s, est. ~48 s
    "tests/controlplane/test_dependency_resolution.py",  # 48 s, one test of 45 s
    "tests/frontend/test_job_page_output_ranks.py",  # 48 s
    "tests/controlplane/cli/test_qm_cli.py",  # 47 s
    "tests/frontend/test_researcher_job_runs_browser.py",  # 45 s
    "tests/controlplane/api/test_api_roles.py",  # 42 s
    "tests/controlplane/test_cohort_audit.py",  # 38 s
    "tests/controlplane/test_history_totals_one_query.py",  # was 69 s, est. ~35 s
    "tests/frontend/test_history_page.py",  # was 72 s, est. ~35 s
    "tests/controlplane/accounting/test_accounting_properties.py",  # 33 s
    "tests/frontend/test_researcher_form_dependencies_browser.py",  # 32 s
    "tests/controlplane/cli/test_qm_journey_flags.py",  # 32 s
    "tests/controlplane/test_healthz.py",  # 31 s
    "tests/controlplane/api/test_api_job_runs.py",  # 30 s
    "tests/frontend/test_researcher_hold_browser.py",  # 30 s
    "tests/frontend/test_researcher_requeue_browser.py",  # 29 s
    "tests/controlplane/loop/test_preemption_budget_counts_preemptions_only.py",  # 28 s
    "tests/controlplane/test_migration_0022_hold_reason.py",  # 28 s
    "tests/controlplane/test_admin_two_admins_in_chromium.py",  # 27 s
    "tests/controlplane/accounting/test_accounting_api.py",  # 26 s
    "tests/frontend/test_operator_maintenance_browser.py",  # 26 s
    "tests/controlplane/agent/test_agent_command_line.py",  # 26 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)
    # sorted() is stable: the other files, and the tests inside every file, keep their order
    items[:] = sorted(items, key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
