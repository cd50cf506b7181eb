"""An admin's integer is refused above what a PostgreSQL `integer` column holds on every database,
the embedded demo's SQLite too: a 400 naming the field, nothing written.

Found by the API audit (4 Dec), on `make demo`: `POST priority-classes/ {"name": "huge-window",
"value": 3, "budget_window_s": 9223372036854775807}` answered 201. DRF bounds a model's integer
field by the connection's range, and SQLite's is 64-bit for every integer column, so the class
was stored; from the next cycle on, the scheduling loop failed on every step (the snapshot's
`now - timedelta(seconds=budget_window_s)` overflowed) until the class was deleted, and a
`grace_period_s` as large made `POST jobs/{id}/cancel/` of a running job a 500, and a
`default_runtime_limit_s` of 10**12 made a drain of its node, and any list of maintenance
windows naming the job, a 500. On PostgreSQL the same values were already a 400 on the field
(`Ensure this value is less than or equal to 2147483647.`): the rule is now the same on both.

The SQLite half runs in a subprocess on a fresh copy of the run's migrated SQLite file (as
loop/test_snapshot_epoch_seconds.py does); the suite's own database is PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlplane.models import Node, PriorityClass

REPO = Path(__file__).resolve().parents[3]
MAX_INT = 2**31 - 1
TOO_BIG = {"2**31": 2**31, "2**63-1": 2**63 - 1}
CLASS_FIELDS = ["grace_period_s", "min_runtime_s", "preemption_budget", "budget_window_s",
                "default_runtime_limit_s", "max_runtime_limit_s"]
NODE_FIELDS = ["cpus", "memory_gb"]

# Each request the checks make, as (label, method, path, body); the bodies name their record
# "big" so that none is written if every one is refused.
REQUESTS: list[tuple[str, str, str, dict[str, Any]]] = [
    *[(f"class {field}={label}", "post", "/api/v1/priority-classes/",
       {"name": "big", "value": 3, field: value,
        **({"max_runtime_limit_s": value} if field in ("default_runtime_limit_s", "min_runtime_s") else {})})
      for field in CLASS_FIELDS for label, value in TOO_BIG.items()],
    *[(f"node {field}={label}", "post", "/api/v1/nodes/",
       {"name": "big", "pool": "p", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 64, "memory_gb": 512,
        "leaf_switch": "l", "spine": "s", field: value})
      for field in NODE_FIELDS for label, value in TOO_BIG.items()],
]
# A grace period has a bound of its own, an hour (models/quotas.MAX_GRACE_PERIOD_S): at the most, it takes that.
ALLOWED = ("class at the most", "post", "/api/v1/priority-classes/",
           {"name": "most", "value": 3, **{field: MAX_INT for field in CLASS_FIELDS}, "grace_period_s": 3600})

_SCRIPT = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
assert connection.vendor == "sqlite", connection.vendor
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient
from controlplane.models import GpuType, Node, PriorityClass
GpuType.objects.create(name="H100-80GB", memory_gb=80)
boss = get_user_model().objects.create_superuser("boss", "boss@example.com", "boss")
client = APIClient()
client.force_authenticate(boss)
answers = {}
for label, method, path, body in json.loads(sys.stdin.read()):
    r = getattr(client, method)(path, body, format="json")
    answers[label] = [r.status_code, r.json()]
answers["written"] = [PriorityClass.objects.filter(name="big").count(), Node.objects.filter(name="big").count()]
print("ANSWERS " + json.dumps(answers))
"""


@pytest.fixture(scope="module")
def sqlite_answers(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> dict[str, Any]:
    db = tmp_path_factory.mktemp("sqlite") / "range.sqlite3"
    shutil.copyfile(migrated_sqlite, db)  # the run's migrated file (tests/controlplane/conftest.py)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          input=json.dumps([*REQUESTS, ALLOWED]), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("ANSWERS ")]
    return dict(json.loads(line.removeprefix("ANSWERS ")))


def _field_of(label: str) -> str:
    return label.split(" ", 1)[1].split("=")[0]


@pytest.mark.parametrize("request_", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_on_sqlite_an_integer_beyond_an_integer_column_is_refused_on_its_field(sqlite_answers, request_) -> None:
    label = request_[0]
    status, body = sqlite_answers[label]

    assert status == 400, (label, body)
    assert _field_of(label) in body["errors"], body
    assert "less than or equal to 2147483647" in " ".join(body["errors"][_field_of(label)]), body


def test_on_sqlite_none_of_the_refused_records_is_written_and_the_largest_value_is_taken(sqlite_answers) -> None:
    assert sqlite_answers["written"] == [0, 0]
    status, body = sqlite_answers[ALLOWED[0]]
    assert status == 201, body
    assert body["budget_window_s"] == MAX_INT and body["grace_period_s"] == 3600


@pytest.mark.django_db
@pytest.mark.parametrize("request_", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_on_postgresql_the_same_values_are_refused_in_the_same_words(fleet, admin, request_) -> None:
    label, method, path, body = request_

    r = getattr(admin, method)(path, body, format="json")

    assert r.status_code == 400, r.json()
    assert "less than or equal to 2147483647" in " ".join(r.json()["errors"][_field_of(label)]), r.json()
    assert not PriorityClass.objects.filter(name="big").exists() and not Node.objects.filter(name="big").exists()
