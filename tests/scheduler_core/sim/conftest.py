"""Make ``scheduler_core`` resolve to the repository's package under a bare ``pytest``.

pytest puts ``tests/`` on ``sys.path`` (it holds the suite-wide conftest), where
``tests/scheduler_core/`` would otherwise be picked up as a namespace package named
``scheduler_core`` whenever the repository root itself is not on the path (it is under
``python -m pytest``, not under ``.venv/bin/pytest``)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
