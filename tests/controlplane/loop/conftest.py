"""Fixtures for the control-loop tests: the loop fleet and the bootstrap secret."""

from __future__ import annotations

from typing import Any

import pytest

from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, build_loop_fleet


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()
