"""GET /api/v1/jobs/{id}/logs/: a job's output, as JSON to follow or as plain text.

    ?rank=0             the process's RANK (default 0)
    ?generation=G       which run (default: the job's latest); `generations` lists them all
    ?offset=N           from byte N on (0 to 2⁶³−1), at most 1 MiB (follow: ask again from `next_offset`)
    ?tail_bytes=N       the last N bytes (at most what is kept, 8 MiB), from a line's start
    ?tail_lines=N       the last N lines (at most 10,000)
    ?format=txt         the text alone (text/plain), the pruning notice first: the job page's
                        "raw text" link, and `curl … | less`

The job is looked up as GET jobs/{id}/ does: another team's job is a 404 here too. The rules
(merging, pruning, what a read returns) are in services/job_logs.py.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer

from controlplane.api.serializers.fields import WholeNumberField
from controlplane.models import Job
from controlplane.services import job_logs
from controlplane.services.whole_numbers import is_whole_number, whole_number

MAX_RANK = 1_000_000
#: A log offset is a bigint (JobLogChunk.offset; the agent's chunks end at 2⁶³−1 at most): past
#: it no output can be. Until 5 Dec `?offset=99999999999999999999` was taken and echoed back.
MAX_OFFSET = 2**63 - 1
QUERY_PARAMETERS = frozenset({"format", "rank", "generation", "offset", "tail_bytes", "tail_lines"})


class LogTextRenderer(BaseRenderer):
    """The output as text/plain. Never HTML: a job's output is shown, not interpreted."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> str:
        # Text, which DRF encodes with `charset`: bytes that are empty (no output yet, a follow
        # with nothing new) made it drop the Content-Type, an answer the schema does not describe.
        if isinstance(data, dict) and "text" in data:
            notice = f"{data['notice']}\n" if data.get("notice") and data.get("text") else ""
            return notice + str(data["text"])
        if isinstance(data, dict):  # an error: each field's words a line, else the detail
            errors = data.get("errors")
            if isinstance(errors, dict) and errors:
                lines = [f"{key}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for key, v in errors.items()]
            else:
                lines = [str(data.get("detail", data))]
            return "\n".join(lines) + "\n"
        return str(data)


def _whole(params: Any, name: str, least: int, most: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    text = str(raw)
    span = f"from {least} to {most}" if most is not None else f"{least} or more"
    if not is_whole_number(text):
        raise ValidationError({name: [f"'{text[:40]}' is not a whole number: give {least} or more."]})
    value = whole_number(text)
    if value < least or (most is not None and value > most):
        shown = text if len(text) <= 40 else f"{text[:40]}…"
        raise ValidationError({name: [f"{shown} is out of range: give {span}."]})
    return value


def rank_and_generation(params: Any) -> tuple[int, int | None]:
    """`?rank=` (default 0) and `?generation=` (default None: the latest run) as whole numbers;
    ValidationError naming the parameter otherwise. The job page's Output panel reads its
    choice with this too, so both say a bad value in the same words."""
    rank = _whole(params, "rank", 0, MAX_RANK)
    return 0 if rank is None else rank, _whole(params, "generation", 1)


def read(job: Job, params: Any) -> dict[str, Any]:
    """The reply to GET jobs/{id}/logs/ with these query parameters (400 naming a bad one)."""
    rank, generation = rank_and_generation(params)
    try:
        output = job_logs.read(
            job, rank=rank, generation=generation,
            offset=_whole(params, "offset", 0, MAX_OFFSET),
            tail_bytes=_whole(params, "tail_bytes", 1, job_logs.keep_bytes()),
            tail_lines=_whole(params, "tail_lines", 1, job_logs.MAX_TAIL_LINES),
        )
    except job_logs.BadRead as error:
        raise ValidationError({k: [v] for k, v in error.errors.items()}) from error
    reply = output.as_json()
    reply["job_state"] = job.state
    return reply


def _whole_schema(least: int, most: int | None = None) -> dict[str, Any]:
    """A whole-number parameter's schema with the bounds `_whole` enforces."""
    return {"type": "integer", "minimum": least, **({"maximum": most} if most is not None else {})}


# Each says its bounds, as docs/api.md does (until 6 Dec the schema's offset said none).
PARAMETERS = [
    OpenApiParameter("rank", _whole_schema(0, MAX_RANK),
                     description=f"The process's RANK (default 0), 0 to {MAX_RANK:,}."),
    OpenApiParameter("generation", _whole_schema(1),
                     description="Which run of the job (default: its latest), 1 or more."),
    OpenApiParameter("offset", _whole_schema(0, MAX_OFFSET),
                     description=f"Read from this byte on (at most 1 MiB a reply); follow with next_offset. "
                                 f"0 to {MAX_OFFSET} (2⁶³−1), as the output's bytes are stored: beyond, a 400 "
                                 "naming it."),
    OpenApiParameter("tail_bytes", int, description="The last N bytes (at most the 8 MiB kept per rank)."),
    OpenApiParameter("tail_lines", int, description="The last N lines (at most 10,000)."),
]

RESPONSE = inline_serializer("JobLogs", fields={
    "job": WholeNumberField(),
    "job_state": serializers.CharField(),
    "generation": WholeNumberField(allow_null=True, help_text="The run read (null: the job never ran)."),
    "generations": serializers.ListField(child=WholeNumberField(), help_text="Every run, oldest first."),
    "rank": WholeNumberField(),
    "ranks": serializers.ListField(child=WholeNumberField(), help_text="Ranks of this run with output."),
    "node": serializers.CharField(allow_null=True, help_text="Where this rank ran."),
    "offset": WholeNumberField(help_text="Byte offset where `text` begins."),
    "next_offset": WholeNumberField(help_text="Ask from here for what comes next (follow)."),
    "end_offset": WholeNumberField(help_text="Bytes received of this rank so far."),
    "pruned_bytes": WholeNumberField(help_text="Bytes at the start no longer kept."),
    "more": serializers.BooleanField(help_text="A forward read stopped at 1 MiB: more after next_offset."),
    "notice": serializers.CharField(help_text="What is missing, in words (pruned bytes, no output yet)."),
    "text": serializers.CharField(help_text="The output, UTF-8 (undecodable bytes read as U+FFFD)."),
})
