"""`qm status JOB`: everything about one job, field by field (with no job: `qm list`), its last
preemption or requeue in its events' words."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from controlplane.cli import arguments, output
from controlplane.cli.client import Api
from controlplane.cli.jobs.dependencies import runs_after
from controlplane.cli.jobs.gpus import elastic, gpus_line, per_gpu
from controlplane.cli.jobs.listing import cmd_list
from controlplane.cli.jobs.waiting import eta_told_text, latest_start_text, position_text
from controlplane.cli.loop_state import loop_warning
from controlplane.services import exit_codes
from controlplane.services.span_text import span_words
from scheduler_core.sentences import counted, gang_roles, gpu_hours

#: A field of `qm status`: its name and what it says.
_Field = tuple[str, Any]


def cmd_status(api: Api, args: argparse.Namespace) -> int:
    """One job, field by field: what it asked for, where it stands, what befell it; with no job,
    `qm list`."""
    if not args.job:
        return cmd_list(api, args)
    job = api.request("GET", f"jobs/{arguments.job_id(args.job)}/")
    if args.json:
        output.emit_json(job)
        return 0
    # One request for the API's explanation of a running or stopping job: a stopping job (state
    # `preempting` whatever stopped it: a preemption, a resize, a cancel, its runtime limit) says
    # why and by when, as `qm explain` does (the state alone read as a preemption for a job its
    # owner had just cancelled); a running job since when, on which GPUs of which nodes. A
    # waiting job's reason, place and ETA are the job's own, and the loop's state (whose last
    # cycle's word they are) comes with it (`loop`), as it does under --json.
    explained = (api.request("GET", f"jobs/{job['id']}/explain/")
                 if job["state"] in ("preempting", "running") else {})
    stopping = explained["reason"] if job["state"] == "preempting" else ""
    running = explained["reason"] if job["state"] == "running" else ""
    output.fields([*_asked_fields(job), *_standing_fields(job, running, stopping),
                   *_preemption_fields(api, job, stopping), ("command", job["command"]),
                   *([("environment", environment(job["env"]))] if job.get("env") else [])])
    if job["state"] == "pending" and (stalled := loop_warning(job.get("loop"),
                                                              "its reason, queue position and start above")):
        output.note(stalled)
    return 0


def environment(env: dict[str, str]) -> str:
    """`NAME=value ...` in name order, as the job page lists them, each as a shell reads it back."""
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(env.items()))


def _asked_fields(job: dict[str, Any]) -> list[_Field]:
    """What the job is and asked for: its name, owners, class, GPUs and their shape, limits."""
    shape = counted(job["gpus"], "GPU") + (f", {job['gpus_per_node']} per node" if job["gpus_per_node"] else "")
    if elastic(job):
        shape += f", {elastic(job)}"
    if job.get("members_on_distinct_nodes"):
        shape += ", members on distinct nodes"
    return [
        ("job", f"{job['id']} {job['name']}"), ("state", output.job_state(job)), ("team", job["team"]),
        ("project", job["project"]), ("submitter", job["submitter"]), ("priority", job["priority_class"]),
        ("gpus", gpus_line(job)), ("shape", shape),
        *([("roles", gang_roles(job["roles"]))] if job.get("roles") else []),
        ("gpu types", (", ".join(job["gpu_types"]) or "any")
         + (f", at least {job['min_gpu_memory_gb']} GB each" if job.get("min_gpu_memory_gb") else "")),
        ("per gpu", per_gpu(job)), ("topology", job["topology"]), ("workload", job.get("workload")),
        ("checkpoints", f"every {span_words(job['checkpoint_interval_s'])}"
         if job.get("checkpoint_interval_s") else ""),
        ("runtime limit", span_words(job["runtime_limit_s"]) if job["runtime_limit_s"] else None),
    ]


def _standing_fields(job: dict[str, Any], running: str, stopping: str) -> list[_Field]:
    """Where the job stands: when it was submitted, started and ended, why it waits and when it
    may start, how it runs or stops, its array and its dependencies."""
    return [
        ("submitted", output.utc_text(job["submitted_at"])),
        ("started", output.utc_text(job["started_at"])), ("finished", output.utc_text(job["finished_at"])),
        ("exit code", None if job["exit_code"] is None else exit_codes.said(job["exit_code"])),
        ("elapsed", output.clock(job["elapsed_s"]) if job.get("elapsed_s") is not None else ""),
        ("gpu-hours", f"{gpu_hours(job['gpu_hours'])} held over all its runs (the accounting's)"
         if job.get("gpu_hours") else ""),
        *_progress_fields(job),
        ("waiting because", f"{job['pending_code']}: {job['pending_message']}" if job["state"] == "pending" else ""),
        *([("hold reason", job["hold_reason"])] if job.get("hold") and job.get("hold_reason") else []),
        ("queue position", position_text(job["queue_position"], job.get("pending_code"), job.get("hold"),
                                         job.get("pending_resolvable", True),
                                         job.get("pending_would_start_if") or "")),
        ("latest start", latest_start_text(job["state"], job["eta"], job.get("pending_resolvable", True),
                                           relative=False, code=job.get("pending_code"),
                                           would_start_if=job.get("pending_would_start_if") or "",
                                           held=bool(job.get("hold")))),
        *([("eta told", told)] if (told := eta_told_text(job)) else []),
        *([("running", running)] if running else []),
        # a running elastic job below its maximum that the last cycle did not grow: why not
        *([("not growing", f"{job['growth_code']}: {job['growth_note']}")]
          if job["state"] == "running" and job.get("growth_code") else []),
        ("stopping", stopping),
        ("array", f"{job['array_id']}[{job['array_index']}]"
         + (f", the array runs at most {counted(job['array_task_limit'], 'task')} at a time"
            if job.get("array_task_limit") else "") if job["array_id"] else ""),
        *([("runs after", runs_after(job))] if job.get("dependencies") or job.get("singleton") else []),
        *([("waited on by", ", ".join(f"job {pk}" for pk in job["dependents"]))] if job.get("dependents") else []),
    ]


def _progress_fields(job: dict[str, Any]) -> list[_Field]:
    """Its progress as the job page's says it: the steps and useful tokens its agents reported,
    and its last checkpoint, when and how long ago (what a preemption now would lose); nothing
    for a job that never ran."""
    if not (job["started_at"] or job.get("steps") or job.get("last_checkpoint_at")):
        return [("progress", ""), ("last checkpoint", "")]
    steps, tokens = job.get("steps") or 0, job.get("useful_tokens") or 0
    running = job["state"] in ("running", "preempting")
    progress = (f"{steps:,} step{'' if steps == 1 else 's'}, {tokens:,} useful token{'' if tokens == 1 else 's'}" if steps or tokens
                else "none reported yet" if running else "none reported")
    saved = job.get("last_checkpoint_at")
    return [("progress", progress),
            ("last checkpoint", f"{output.utc_text(saved)} ({output.ago(saved)} ago)" if saved else "none reported")]


def _preemption_fields(api: Api, job: dict[str, Any], stopping: str) -> list[_Field]:
    """How often the job was preempted or requeued and the work lost, and its last preemption
    (or requeue asked for, or resize) in its events' words: one request, none for a job never
    stopped or stopping now."""
    preempted, requeued, stopped_for = _last_preemption(api, job) if not stopping else ("", "", "")
    # A requeue someone asked for (qm requeue) is no preemption: its notice says who asked and why;
    # nor is a resize.
    asked = stopped_for in ("Requeued", "RequeuedHeld")
    signal_label = "requeue asked" if asked else "last resized" if stopped_for == "Resized" else "last preempted"
    preemptions = str(job["preemption_count"])
    other = job.get("requeue_count", job["preemption_count"]) - job["preemption_count"]
    if other > 0:  # resized, fenced or asked for: requeued whole, but not against the preemption budget
        preemptions += (f"; requeued {other} more time{'s' if other != 1 else ''} to resize, off a lost node or "
                        "on request")
    if job["preemption_count"] or other > 0:
        preemptions += f", {gpu_hours((job.get('lost_gpu_seconds') or 0) / 3600)} GPU-hours of work lost"
    return [
        ("preemptions", preemptions),
        *([(signal_label, preempted)] if preempted else []),
        *([("requeued", requeued)] if requeued else []),
    ]


#: The events of a preemption: its notice, then how the stop ended (the job page's "Preempted").
#: A resize's or a requeue asked for is noticed `job.stopping` (`job.preempting` before the
#: control plane's migration 0032: both are read, by their reason).
_SIGNAL_KINDS = ("job.preempting", "job.stopping")

_REQUEUE_KINDS = ("job.preempted", "job.requeued", "job.resized")

#: The reasons of the notices that put the job back in the queue (the API's codes:
#: services/stopping.REQUEUEING_STOPS); a gang member's exit is noticed so too, and ends it.
_REQUEUEING_STOPS = ("Preempted", "Resized", "Requeued", "RequeuedHeld")


def _last_preemption(api: Api, job: dict[str, Any]) -> tuple[str, str, str]:
    """The notice of the job's last preemption (when, why, for whom, the grace it had), what
    became of it (requeued, the work lost), in the events' words, and the notice's reason (a
    resize's or a requeue asked for is no preemption): ("", "", "") for a job never preempted.
    One request, newest first."""
    if not job.get("requeue_count", job["preemption_count"]):
        return "", "", ""
    page = api.request("GET", "events/", params={"job": job["id"], "kind": [*_SIGNAL_KINDS, *_REQUEUE_KINDS],
                                                  "limit": 3})
    signal = requeue = None
    for event in page["results"]:  # newest first: the requeue, then the notice it followed
        if event["kind"] in _REQUEUE_KINDS and signal is None and requeue is None:
            requeue = event
        elif event["kind"] in _SIGNAL_KINDS and signal is None and event.get("reason") in _REQUEUEING_STOPS:
            signal = event  # (a gang member's exit, the run's end, is no preemption)
    return _said(signal), _said(requeue), str(signal.get("reason") or "") if signal else ""


def _said(event: dict[str, Any] | None) -> str:
    """`2026-11-30 01:46:10 UTC: <its message>`, or "" for no event."""
    return f"{output.utc_text(event['created_at'])}: {event['message']}" if event else ""
