"""The admin UI refuses an integer above what a PostgreSQL `integer` column holds on every database,
the embedded demo's SQLite too, on the field and in the API's words; nothing is written.

Found walking through the demo as an admin (`make demo`, headless Chromium on /admin/, 5 Dec):
the research class's budget window typed as 86400000000 s (a day with four zeros too many) was
saved ("changed successfully"), and from the next cycle on the scheduling loop failed on every
step (`OverflowError: date value out of range` in the snapshot's `now - timedelta(seconds=…)`):
no job was placed until the class was fixed. The API refused the same value as a 400 since 4 Dec
(tests/controlplane/api/test_adminapi_integer_range_on_sqlite.py), and on PostgreSQL the admin
form did too (the column's range); on SQLite every integer column is 64-bit, so the admin form
took anything up to 2**63 - 1.

The SQLite half runs in a subprocess on a fresh copy of the run's migrated SQLite file, as the API's test does;
the suite's own database is PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlplane.models import GpuType, Node, PriorityClass
from tests.controlplane import factories as f

REPO = Path(__file__).resolve().parents[2]
MAX_INT = 2**31 - 1
WORDS = "Ensure this value is less than or equal to 2147483647."
CLASS_FIELDS = ["value", "grace_period_s", "min_runtime_s", "preemption_budget", "budget_window_s",
                "default_runtime_limit_s", "max_runtime_limit_s"]
# (label, which record's change page, field, value): each change alone, on a record that exists.
CHANGES: list[tuple[str, str, str, int]] = [
    *[(f"class {field}={value}", "class", field, value) for field in CLASS_FIELDS for value in (2**31, 86400000000)],
    *[(f"node {field}={value}", "node", field, value) for field in ("cpus", "memory_gb") for value in (2**31,)],
    ("gpu type memory_gb=2**31", "gpu_type", "memory_gb", 2**31),
]

_SCRIPT = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
assert connection.vendor == "sqlite", connection.vendor
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()  # responses carry their template context, as in the suite
from controlplane.models import GpuType, Node, PriorityClass
from tests.controlplane import factories as f
h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
research = PriorityClass.objects.create(name="research", value=500)
node = Node.objects.create(name="h100-01", pool="h100", gpu_type=h100, gpu_count=8, cpus=64, memory_gb=512,
                           leaf_switch="leaf-1", spine="spine-1")
get_user_model().objects.create_superuser("boss", "boss@example.com", "boss")
client = Client()
assert client.login(username="boss", password="boss")
paths = {"class": f"/admin/controlplane/priorityclass/{research.pk}/change/",
         "node": f"/admin/controlplane/node/{node.pk}/change/",
         "gpu_type": f"/admin/controlplane/gputype/{h100.pk}/change/"}
answers = {}
for label, record, field, value in json.loads(sys.stdin.read()):
    form = f.opened_admin_form(client, paths[record])
    form[field] = value
    r = client.post(paths[record], form)
    errors = ({k: list(v) for k, v in r.context["adminform"].form.errors.items()}
              if r.status_code == 200 and r.context else None)
    answers[label] = [r.status_code, errors]
research.refresh_from_db(); node.refresh_from_db(); h100.refresh_from_db()
answers["stored"] = [[getattr(research, name) for name in %(class_fields)r], node.cpus, node.memory_gb, h100.memory_gb]
form = f.opened_admin_form(client, paths["class"])
form.update({name: %(most)d for name in %(class_fields)r})
form["grace_period_s"] = 3600  # its own bound, an hour (models/quotas.MAX_GRACE_PERIOD_S)
r = client.post(paths["class"], form)
research.refresh_from_db()
answers["most"] = [r.status_code, research.budget_window_s, research.value, research.grace_period_s]
print("ANSWERS " + json.dumps(answers))
""" % {"class_fields": CLASS_FIELDS, "most": MAX_INT}


@pytest.fixture(scope="module")
def sqlite_answers(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> dict[str, Any]:
    db = tmp_path_factory.mktemp("sqlite") / "admin-range.sqlite3"
    shutil.copyfile(migrated_sqlite, db)  # the run's migrated file (tests/controlplane/conftest.py)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          input=json.dumps(CHANGES), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("ANSWERS ")]
    return dict(json.loads(line.removeprefix("ANSWERS ")))


@pytest.mark.parametrize("change", CHANGES, ids=[c[0] for c in CHANGES])
def test_on_sqlite_an_admin_integer_beyond_an_integer_column_is_refused_on_its_field(sqlite_answers, change) -> None:
    label, _, field, _ = change
    status, errors = sqlite_answers[label]

    assert status == 200, f"{label}: the form was accepted"
    assert errors == {field: [WORDS]}, errors


def test_on_sqlite_nothing_refused_is_written_and_the_largest_value_is_taken(sqlite_answers) -> None:
    assert sqlite_answers["stored"] == [[500, 30, 0, 3, 86400, 4 * 3600, 7 * 86400], 64, 512, 80]
    assert sqlite_answers["most"] == [302, MAX_INT, MAX_INT, 3600]


@pytest.mark.django_db
@pytest.mark.parametrize("change", CHANGES, ids=[c[0] for c in CHANGES])
def test_on_postgresql_the_same_values_are_refused_in_the_same_words(fleet, browser, change) -> None:
    label, record, field, value = change
    obj = {"class": fleet.research, "node": fleet.nodes[0], "gpu_type": fleet.h100}[record]
    path = f"/admin/controlplane/{obj._meta.model_name}/{obj.pk}/change/"
    form = f.opened_admin_form(browser, path)
    form[field] = value

    r = browser.post(path, form)

    assert r.status_code == 200, f"{label}: the form was accepted"
    assert {k: list(v) for k, v in r.context["adminform"].form.errors.items()} == {field: [WORDS]}
    assert type(obj).objects.get(pk=obj.pk).__dict__.get(field) == obj.__dict__.get(field)
    assert not PriorityClass.objects.filter(value__gt=MAX_INT).exists()
    assert not Node.objects.filter(cpus__gt=MAX_INT).exists() and not GpuType.objects.filter(memory_gb__gt=MAX_INT)
