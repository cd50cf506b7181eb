"""Engine tests: make ``scheduler_core`` resolve to the repository's package and put the
fluent builders (``engine_builders``) on the path.

pytest prepends ``tests/`` to ``sys.path`` for the suite-wide conftest, where
``tests/scheduler_core/`` would otherwise shadow the real package as a namespace package when
the repository root is not on the path (as under ``.venv/bin/pytest``)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
