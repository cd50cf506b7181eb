"""Fixtures for the control-loop tests: the loop fleet and the bootstrap secret; and a chaos
drill's evidence kept whenever it fails."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from tests.controlplane.loop.chaos_cluster import Cluster
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, build_loop_fleet


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A drill (a test with a `cluster`) that fails keeps its evidence (Cluster.keep_evidence),
    whatever failed in it, before its fixture stops the processes; shown with the failure,
    unless its own message already carries it."""
    report = yield
    cluster = getattr(item, "funcargs", {}).get("cluster")
    if report.when == "call" and report.failed and isinstance(cluster, Cluster) and cluster.evidence is None:
        report.sections.append(("chaos drill's evidence", cluster.keep_evidence(item.name)))
    return report


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()
