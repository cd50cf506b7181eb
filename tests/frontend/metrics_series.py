"""The series of one metric as `/metrics` exposes it to a scraper, for the operator tests."""

from __future__ import annotations

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families


def series(client: Client, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Each sample of `name`: its labels (sorted pairs) → its value."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out
