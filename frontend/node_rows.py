"""The Nodes page's table rows (`_nodes_table.html`), written in one pass in Python.

A 1,250-node fleet's rows through the template's loop, its `state_badge` tag and its filters
took most of the page's time (docs/benchmarks.md, Scale audit); here each row is one string,
every value escaped as the template's autoescape did (html.escape, which Django's escape calls,
without its lazy wrapper), each state's badge written once, and the URLs that differ only by a
node's name or id reversed once for all rows. What a row says is unchanged: its name (the
row's header, `th scope="row"`, linking its page), GPUs, GPUs in use, tier, state with how it
returns, the cordon's reason and its maintenance window, heartbeat, and for admins its actions.
Its GPUs and tier are `wide-only`: a phone leaves them to the node's page (qm.css).
"""

from __future__ import annotations

from html import escape as _escape
from typing import Any
from urllib.parse import quote

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from frontend.templatetags.qm import duration, state_badge, until, utc

#: An id no node has, reversed in its place and then replaced by each row's id.
_ID = 987654321
_RETIRE = (" It leaves the fleet for good: no work, no capacity, its agent refused, until an admin"
           " returns it to service.")


def action_question(verb: str, name: str) -> str:
    """What an admin's node button asks before it acts, on the Nodes page and on the node's own
    page alike (unescaped): retiring and returning say what follows. Until 7 Dec the node's page
    asked only "Retire a100-04?"."""
    if verb == "return":
        return f"Return {name} to service? It is down until its agent registers, then cordoned."
    return f"{verb[:1].upper()}{verb[1:]} {name}?{_RETIRE if verb == 'retire' else ''}"
_REASON = ' data-body-from="node-action-reason" data-body-field="reason" data-body-clear'
#: What Django's reverse leaves unquoted in a path (RFC 3986's sub-delims and "/~:@").
_URL_SAFE = "!$&'()*+,;=/~:@"
_NO_ACTIONS = '<small class="muted">health state set by the control loop</small>'


def escape(value: object) -> str:
    return _escape(str(value))


def action_urls(verbs: set[str]) -> dict[str, tuple[str, str]]:
    """Per verb, its API URL cut around the node's id: reversed once, not once per row."""
    cut = {}
    for verb in verbs:
        before, _, after = reverse(f"v1:node-{verb}", args=[_ID]).partition(str(_ID))
        cut[verb] = (before, after)
    return cut


def node_url(prefix: str, name: str) -> str:
    """`/nodes/<name>/` as `{% url 'frontend:node' name %}` writes it (reverse's quoting)."""
    return f"{prefix}{quote(name, safe=_URL_SAFE)}/"


def _state_cell(r: dict[str, Any], badges: dict[str, str]) -> str:
    state = r["node"].state
    cell = badges.get(state) or badges.setdefault(state, str(state_badge(state)))
    if r["returns_as"]:
        cell += f' <small class="muted">returns {escape(r["returns_as"])}</small>'
    if r["cordon_reason"]:
        cell += f' <small class="muted" data-cordon-reason>{escape(r["cordon_reason"])}</small>'
    m = r["maintenance"]
    if m:
        window = m["window"]
        said = "in maintenance" if m["state"] == "active" else f"maintenance {escape(until(window.start_at))}"
        cell += (f' <span class="badge maintenance-{escape(m["state"])}" data-node-maintenance="{window.pk}"'
                 f' title="Maintenance window {window.pk}: {escape(window.reason)}, {escape(utc(window.start_at))}'
                 f' to {escape(utc(window.end_at))}">{said}</span>')
    return cell


def _actions_cell(r: dict[str, Any], name: str) -> str:
    buttons = ""
    for verb, url in r["actions"]:
        extra = _REASON if verb in ("cordon", "drain") else ""
        buttons += (f'<button type="button" data-api-post="{escape(url)}" data-node-action="{verb}"{extra}'
                    f' data-done="{escape(name)}: {verb} done." data-confirm="{escape(action_question(verb, name))}">'
                    f"{verb}</button> ")
    return f'<td class="actions">{buttons or _NO_ACTIONS}</td>'


def rows_html(rows: list[dict[str, Any]], is_admin: bool) -> SafeString:
    """The `<tr>`s of one leaf switch's table, as the page and its live update show them."""
    prefix = reverse("frontend:node", args=["x"])[:-2]
    badges: dict[str, str] = {}  # a state's badge, written once
    out = []
    for r in rows:
        node = r["node"]
        name = escape(node.name)
        beat = "never" if r["heartbeat_age_s"] is None else f"{escape(duration(r['heartbeat_age_s']))} ago"
        simulated = ' <small class="muted">simulated</small>' if r["simulated"] else ""
        out.append(
            f'\n      <tr data-node="{name}">'
            f'\n        <th scope="row"><a class="nobr" href="{escape(node_url(prefix, node.name))}">{name}</a>{simulated}</th>'
            f'\n        <td class="wide-only">{len(node.slots)} × <span class="nobr">{escape(node.gpu_type)}</span></td>'
            f"\n        <td>{node.used}</td>"
            f"\n        <td class=\"wide-only\">{escape(r['tier'])}</td>"
            f'\n        <td class="node-state">{_state_cell(r, badges)}</td>'
            f"\n        <td>{beat}</td>"
            f"\n        {_actions_cell(r, node.name) if is_admin else ''}"
            "\n      </tr>")
    return mark_safe("".join(out))  # noqa: S308 -- every value above escaped
