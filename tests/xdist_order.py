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

#: Files whose tests took over 18 s in all on a 3-worker run, longest first: the non-chaos suite's
#: junit XML of 6 Dec 09:11 UTC (21:01 for 5,497 tests, 3,662 s of test time, at a load average
#: of 5 to 19 from other work on the machine; the figures are that run's, not a quiet one's).
#: Refresh: run the non-chaos part as run-tests.sh does with `--junitxml=FILE`, sum each file's
#: testcase times, keep those over ~18 s. Files further down the suite's order (tests/frontend/ is
#: collected last) matter most here: one of ~30 s handed out last can run alone at the end.
LONGEST_FIRST = (
    "tests/frontend/test_browser_pages.py",  # 149 s
    "tests/controlplane/accounting/test_accounting_properties.py",  # 90 s
    "tests/controlplane/api/test_api_schema_fuzz_jobs.py",  # 76 s
    "tests/frontend/test_pages_fit_laptops_browser.py",  # 74 s
    "tests/controlplane/api/test_api_schema_fuzz_prices_and_hooks.py",  # 70 s
    "tests/controlplane/accounting/test_accounting_old_price_corrections.py",  # 69 s
    "tests/controlplane/loop/test_beat_runs_the_loop_without_broker.py",  # 68 s
    "tests/frontend/test_showback_cost_chart.py",  # 60 s
    "tests/frontend/test_admin_accessible_browser.py",  # 59 s
    "tests/controlplane/api/test_api_schema_fuzz_nodes.py",  # 53 s
    "tests/frontend/test_pages_accessible_browser.py",  # 52 s
    "tests/frontend/test_job_page_runs_fit_browser.py",  # 47 s
    "tests/frontend/test_every_page_every_role.py",  # 45 s
    "tests/controlplane/api/test_api_roles.py",  # 41 s
    "tests/controlplane/cli/test_cli_history.py",  # 39 s
    "tests/controlplane/accounting/test_accounting_api_fuzz.py",  # 38 s
    "tests/controlplane/cli/test_qm_researcher_paths.py",  # 34 s
    "tests/frontend/test_researcher_change_browser.py",  # 33 s
    "tests/frontend/test_history_page.py",  # 31 s
    "tests/frontend/test_charts_by_keyboard_browser.py",  # 30 s
    "tests/controlplane/accounting/test_demo_tiers.py",  # 29 s
    "tests/frontend/test_showback_one_bucket_browser.py",  # 28 s
    "tests/frontend/test_finance2_showback_csv_is_the_page.py",  # 28 s
    "tests/frontend/test_operator_cordon_reason_browser.py",  # 28 s
    "tests/controlplane/agent/test_sre_agent_survives_what_a_job_writes_as_progress.py",  # 26 s
    "tests/controlplane/agent/test_agent_prunes_finished_runs.py",  # 26 s
    "tests/controlplane/test_history_totals_one_query.py",  # 26 s
    "tests/frontend/test_researcher_job_runs_browser.py",  # 25 s
    "tests/frontend/test_job_page_output_ranks.py",  # 25 s
    "tests/controlplane/accounting/test_accounting_capacity_joins.py",  # 25 s
    "tests/frontend/test_researcher_form_roles_browser.py",  # 25 s
    "tests/controlplane/cli/test_qm_cli.py",  # 24 s
    "tests/controlplane/agent/test_agent_output_cap.py",  # 24 s
    "tests/frontend/test_admin_user_roles_browser.py",  # 23 s
    "tests/frontend/test_finance2_token_price.py",  # 22 s
    "tests/controlplane/api/test_api_schema_fuzz_rest.py",  # 21 s
    "tests/frontend/test_researcher_hold_browser.py",  # 21 s
    "tests/frontend/test_researcher_requeue_browser.py",  # 20 s
    "tests/frontend/test_operator_maintenance_browser.py",  # 20 s
    "tests/controlplane/test_notification_hooks.py",  # 20 s
    "tests/frontend/test_job_page_output.py",  # 20 s
    "tests/frontend/test_overview_tiles_fit_browser.py",  # 19 s
    "tests/controlplane/api/test_api_every_route_every_role.py",  # 19 s
    "tests/controlplane/api/test_api_schema_fuzz_teams.py",  # 19 s
    "tests/controlplane/test_ops_secret_key.py",  # 18 s
    "tests/frontend/test_researcher_notifications_browser.py",  # 18 s
    "tests/controlplane/test_ops_settings_refused.py",  # 18 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)
    # sorted() is stable: the other files, and the tests inside every file, keep their order
    items[:] = sorted(items, key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
