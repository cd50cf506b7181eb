"""frontend/node_rows.py: the Nodes page's rows written in one pass escape every value as the
template's autoescape did, head each row with the node's name, and give admins the actions'
buttons (URLs reversed once, filled in per node)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

from django.urls import reverse

from frontend.heatmap import NodeRow, Slot
from frontend.node_rows import action_urls, rows_html


def row(**kw: Any) -> dict[str, Any]:
    node = NodeRow(id=42, name="h100-<07>", pool="h100", leaf_switch="leaf-1", spine="s1", state="cordoned",
                   gpu_type="H100-80GB", capacity_tier="on_demand",
                   slots=(Slot(team="a", job_id=1, team_id=1), None, None, None))
    cut = action_urls({"uncordon", "drain", "retire"})
    return {"node": node, "heartbeat_age_s": 30.0, "simulated": True, "tier": "On-demand", "returns_as": None,
            "maintenance": None, "cordon_reason": 'PSU <fault> & "x"',
            "actions": [(v, f"{cut[v][0]}{node.id}{cut[v][1]}") for v in ("uncordon", "drain", "retire")], **kw}


def test_a_row_is_headed_by_its_name_and_escapes_what_an_operator_typed() -> None:
    html = rows_html([row()], is_admin=True)
    assert '<th scope="row"><a class="nobr" href="/nodes/h100-%3C07%3E/">h100-&lt;07&gt;</a>' in html
    assert '<small class="muted">simulated</small></th>' in html
    assert '<td class="wide-only">4 × <span class="nobr">H100-80GB</span></td>' in html and "<td>1</td>" in html
    assert '<td class="wide-only">On-demand</td>' in html
    assert 'data-cordon-reason>PSU &lt;fault&gt; &amp; &quot;x&quot;</small>' in html
    assert "<td>30 s ago</td>" in html
    assert "<fault>" not in html and "<07>" not in html


def test_admins_get_each_actions_button_with_its_api_url_and_others_none() -> None:
    html = rows_html([row()], is_admin=True)
    for verb in ("uncordon", "drain", "retire"):
        assert f'data-api-post="{reverse(f"v1:node-{verb}", args=[42])}" data-node-action="{verb}"' in html
    assert 'data-node-action="drain" data-body-from="node-action-reason"' in html
    assert 'data-confirm="Retire h100-&lt;07&gt;? It leaves the fleet for good' in html
    assert 'class="actions"' not in rows_html([row()], is_admin=False)
    assert "health state set by the control loop" in rows_html([row(actions=[])], is_admin=True)


def test_a_row_says_how_it_returns_and_its_maintenance_window() -> None:
    start = datetime(2026, 12, 6, 2, 0, tzinfo=timezone.utc)
    window = SimpleNamespace(pk=3, reason="fw <upgrade>", start_at=start, end_at=start + timedelta(hours=2))
    html = rows_html([row(returns_as="cordoned", heartbeat_age_s=None,
                          maintenance={"state": "active", "window": window})], is_admin=False)
    assert '<small class="muted">returns cordoned</small>' in html and "<td>never</td>" in html
    assert ('<span class="badge maintenance-active" data-node-maintenance="3" title="Maintenance window 3: '
            'fw &lt;upgrade&gt;, 2026-12-06 02:00:00 UTC to 2026-12-06 04:00:00 UTC">in maintenance</span>') in html
