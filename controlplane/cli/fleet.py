"""The fleet: `qm sinfo` (per pool its nodes, GPUs and fragmentation, and the queue's depth),
`qm nodes` and an admin's actions on a node (`qm cordon`, `drain`, `uncordon`, `qm nodes retire|return`)."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from controlplane.cli import output
from controlplane.cli.client import Api, CliError, UsageError
from controlplane.cli.loop_state import loop_warning
from scheduler_core.sentences import counted


def cmd_sinfo(api: Api, args: argparse.Namespace) -> int:
    """Slurm's sinfo for a GPU fleet: per pool its nodes and GPUs (held, free, away), the largest
    free block and the GPUs stranded by fragmentation, then the queue's depth."""
    fragmentation = api.request("GET", "metrics/fragmentation/")
    queue = api.request("GET", "metrics/queue/")
    if args.json:
        output.emit_json({"fragmentation": fragmentation, "queue": queue})
        return 0
    output.table(
        [(p["pool"], p["gpu_type"], p["nodes"], p["whole_free_nodes"], p["partially_used_nodes"], p["total_gpus"],
          p["allocated_gpus"], p["free_gpus"], p["unavailable_gpus"], p["largest_free_block"], p["stranded_gpus"])
         for p in fragmentation["pools"]],
        ["POOL", "GPU TYPE", "NODES", "WHOLE FREE", "PART USED", "GPUS", "HELD", "FREE", "AWAY", "LARGEST FREE",
         "STRANDED"],
        wide=["WHOLE FREE", "PART USED"],  # the narrow view fits 80 columns; FREE and LARGEST FREE say as much
    )
    reasons = ", ".join(f"{n} {code}" for code, n in sorted(queue["pending_by_reason"].items(), key=lambda kv: -kv[1]))
    output.note(f"Queue: {counted(queue['pending_jobs'], 'job')} waiting for {counted(queue['pending_gpus'], 'GPU')}"
          + (f" ({reasons})" if reasons else "") + f"; {counted(queue['running_jobs'], 'job')} running on "
          f"{counted(queue['running_gpus'], 'GPU')}.")
    # Why jobs wait is the last cycle's word: a dead loop's reasons read as a healthy queue's.
    if stalled := loop_warning(queue.get("loop"), "the reasons above"):
        output.note(stalled)
    output.note("AWAY: free GPUs on nodes that take no work (not ready, or in a maintenance window). STRANDED: free GPUs "
          "on partly used nodes while a job needing whole nodes of the pool waits.")
    return 0


# ------------------------------------------------------------------------------------ nodes


NODE_ACTIONS = ("cordon", "drain", "uncordon", "retire", "return")


def _node_state(node: dict[str, Any]) -> str:
    """A node away (down, quarantined, or suspect after a cordon) that an operator cordoned comes
    back cordoned: say so; a retired node says since when."""
    if node["state"] == "retired" and node.get("retired_at"):
        return f"retired {str(node['retired_at'])[:10]}"
    if node["state"] in ("down", "quarantined", "suspect") and node.get("unschedulable"):
        why = f": {node['cordon_reason']}" if node.get("cordon_reason") else ""
        return f"{node['state']} (returns cordoned{why})"
    if node.get("cordon_reason"):  # why an operator took it out of service (sinfo -R)
        return f"{node['state']}: {node['cordon_reason']}"
    if node.get("maintenance_window") is not None:  # it takes no work until the window ends
        ends = output.parse_time(node.get("maintenance_ends_at"))
        return f"{node['state']} (maintenance {node['maintenance_window']}" + (
            f" until {_clock(ends)})" if ends else ")")
    return str(node["state"])


def cmd_nodes(api: Api, args: argparse.Namespace) -> int:
    """`qm nodes` lists the fleet (the API leaves retired nodes out: ?retired=false), `--retired`
    only the retired ones, `--all` both; `qm nodes ACTION NODE` acts on one node, as `qm cordon
    NODE` does."""
    if args.action is not None:
        if args.action not in NODE_ACTIONS:
            raise UsageError(f"unknown node action '{args.action}': one of {', '.join(NODE_ACTIONS)} "
                           "(e.g. `qm nodes retire NODE`)")
        if not args.node:
            raise UsageError(f"`qm nodes {args.action}` needs a node name: qm nodes {args.action} NODE")
        return _node_action(api, args, args.action)
    if args.node:
        raise UsageError(f"`qm nodes` takes no node name alone: `qm nodes ACTION {args.node}` with ACTION one of "
                       + ", ".join(NODE_ACTIONS))
    if getattr(args, "reason", None) is not None:
        raise UsageError("--reason goes with an action: qm nodes drain NODE --reason \"bad DIMM\"")
    if args.all and args.retired:
        raise UsageError("--all and --retired do not go together: --all lists every node, --retired only the retired")
    params: dict[str, Any] = {}
    if not args.all:
        params["retired"] = "true" if args.retired else "false"
    # Every page: a fleet past 1,000 nodes was listed to its 1,000th, the rest left to the API.
    page = api.listed("nodes/", params)
    rows = page["results"]
    if args.json:
        output.emit_json(page)
        return 0
    if args.retired and not rows:
        output.note("No retired nodes.")  # without the table's header over nothing (it printed one)
        return 0
    output.table(
        [(n["name"], n["pool"], n["gpu_type"], f"{n['allocated_gpus']}/{n['gpu_count']}", _node_state(n), n["leaf_switch"],
          output.age(n["last_heartbeat_at"])) for n in rows],
        ["NODE", "POOL", "GPU TYPE", "GPUS USED", "STATE", "LEAF", "HEARTBEAT"], cut=["STATE"],
    )
    if not args.all and not args.retired:
        retired = api.request("GET", "nodes/", params={"retired": "true", "limit": 1})
        hidden = int(retired.get("count", 0))
        if hidden:
            output.note(f"{hidden} retired node{'s' if hidden > 1 else ''} not shown, out of the fleet: "
                  "qm nodes --retired lists them (--all with the rest)")
    return 0


def cmd_node_action(api: Api, args: argparse.Namespace) -> int:
    return _node_action(api, args, args.command)


def _node_action(api: Api, args: argparse.Namespace, action: str) -> int:
    reason = getattr(args, "reason", None)
    if reason is not None and action not in ("cordon", "drain"):  # refused before the node is looked up
        raise UsageError(f"--reason goes with cordon or drain, not {action}")
    found = api.request("GET", "nodes/", params={"name": args.node})["results"]
    if not found:
        raise CliError(f"no node named '{args.node}'")
    node = api.request("POST", f"nodes/{found[0]['id']}/{action}/",
                       body={"reason": reason} if reason is not None else None)
    if args.json:
        output.emit_json(node)
    elif node.get("detail") and action in ("cordon", "drain", "uncordon"):
        output.note(node["detail"])  # what it did, and the jobs a cordon or drain leaves running there
    elif node["state"] == "retired":
        output.note(f"{node['name']} is retired: out of the fleet (no work, no capacity, its agent refused) "
                             f"until an admin returns it to service (qm nodes return {node['name']}).")
    elif action == "return":
        output.note(f"{node['name']} is {node['state']}: back in the fleet, until its agent registers "
                             "again; it then comes back " + ("cordoned (qm uncordon it to take work)."
                                                            if node.get("unschedulable") else "ready."))
    else:
        away = node["state"] in ("down", "quarantined") or (node["state"] == "suspect" and node.get("unschedulable"))
        back = (" It returns " + ("cordoned" if node.get("unschedulable") else "ready") + " when its agent "
                + ("heartbeats" if node["state"] == "suspect" else "registers") + " again.")
        output.note(f"{node['name']} is {node['state']}." + (back if away else ""))
    return 0


def _clock(at: datetime) -> str:
    """`06:28 UTC` today (UTC), else `2026-12-05 06:28 UTC`, as the API's node sentences say it:
    a window ending tomorrow read "until 06:28 UTC" as if today."""
    at = at.astimezone(timezone.utc)
    return f"{at:%H:%M} UTC" if at.date() == datetime.now(timezone.utc).date() else f"{at:%Y-%m-%d %H:%M} UTC"
