"""A job's GPUs as `qm list` and `qm status` say them: asked and held, an elastic job's range, and
the host resources asked per GPU."""

from __future__ import annotations

from typing import Any


def elastic(job: dict[str, Any]) -> str:
    """`elastic 4–16` for an elastic job, else empty."""
    if not (job.get("min_gpus") or job.get("max_gpus")):
        return ""
    return f"elastic {job['min_gpus'] or job['gpus']}–{job['max_gpus'] or job['gpus']}"


def gpus_cell(job: dict[str, Any]) -> str | int:
    """The list's GPUS cell: the GPUs asked, or `held/asked` for an elastic job holding GPUs (it
    may have grown or shrunk) and for any job holding other than it asked."""
    held = job.get("gpus_held") or 0
    if held and (elastic(job) or held != job["gpus"]):
        return f"{held}/{job['gpus']}"
    return job["gpus"]


def gpus_line(job: dict[str, Any]) -> str:
    """`16 held (asked 8, elastic 4–16)`; `none held (asked 8)` for a job holding no GPUs."""
    held = job.get("gpus_held") or 0
    asked = ", ".join(part for part in (f"asked {job['gpus']}", elastic(job)) if part)
    return f"{held or 'none'} held ({asked})"


def per_gpu(job: dict[str, Any]) -> str:
    """`8 CPUs, 64 GB memory`: the host resources asked per GPU; "" when none."""
    parts = []
    if job.get("cpus_per_gpu"):
        parts.append(f"{job['cpus_per_gpu']} CPU{'s' if job['cpus_per_gpu'] != 1 else ''}")
    if job.get("memory_gb_per_gpu"):
        parts.append(f"{job['memory_gb_per_gpu']} GB memory")
    return ", ".join(parts)
