"""`qm explain JOB`: why a job waits (or does not grow), and when it may start."""

from __future__ import annotations

import argparse

from controlplane.cli import arguments, output
from controlplane.cli.client import Api
from controlplane.cli.jobs.states import FINISHED_STATES, ended_words
from controlplane.cli.jobs.waiting import (
    eta_record_text,
    first_eta_text,
    latest_start_text,
    likely_start_text,
    order_text,
    position_text,
)
from controlplane.cli.loop_state import loop_warning


def cmd_explain(api: Api, args: argparse.Namespace) -> int:
    e = api.request("GET", f"jobs/{arguments.job_id(args.job)}/explain/")
    if args.json:
        output.emit_json(e)
        return 0
    # Its state_label in words: a job being cancelled is "stopping: cancelled", as qm list says;
    # an ended one how it ended, as qm events and qm logs say it ("is failed" read as a typo).
    doing = (ended_words(e["state"]) if e["state"] in FINISHED_STATES
             else f"is {str(e.get('state_label') or e['state']).replace('_', ' ')}")
    head = f"Job {e['job']} ({e['name']}) {doing}"
    output.note(head + (f": {e['reason_code']}" if e["reason_code"] else "."))
    output.note(f"  {output.visible(e['reason'])}")
    if e["state"] == "pending":
        start = latest_start_text(e["state"], e["eta"], e["resolvable"], relative=True, code=e["reason_code"],
                                  would_start_if=e["would_start_if"], held=e["reason_code"] == "Held")
        output.fields([
            ("  queue position", position_text(e["queue_position"], e["reason_code"], e["reason_code"] == "Held",
                                                e["resolvable"], e["would_start_if"])),
            ("  latest start", start),
            *([("  first eta", first)] if (first := first_eta_text(e)) else []),
            *([("  etas lately", lately)] if e["eta"] and (lately := eta_record_text(e)) else []),
            *([("  likely start", likely)] if (likely := likely_start_text(e)) else []),
            *([("  priority", order)] if (order := order_text(api, e["job"], can_run=bool(e["resolvable"]))) else []),
            ("  would start if", e["would_start_if"]),
            ("  can it ever run", "yes" if e["resolvable"] else "no, not as asked: change the request"),
        ])
        # Its reason, place and ETA are the last cycle's word: a stalled loop's read as a live one's.
        if stalled := loop_warning(e.get("loop"), "its reason, queue position and start above"):
            output.note(f"  {stalled}")
    elif e.get("growth_code"):
        output.fields([("  not growing", f"{e['growth_code']}: {e['growth_note']}")])
    return 0
