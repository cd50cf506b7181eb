"""Jobs a sentence names, said to the person reading it.

The engine's reasons and the events name other jobs by id: "It fits only on GPUs reserved for
job 333", "Preempted: higher-priority job 282 (production, 100) needs 8 GPUs". A member may read
only their own teams' jobs, and other teams' work reaches them as counts and team names (the
node page says "a job of team vision"). So a job the reader may not read is said the same way,
by its team only: "reserved for a job of team vision", "Preempted: a higher-priority job of team
vision (production, 100) needs 8 GPUs".

The stored sentences keep every id (the audit trail, admins); only what is said to a reader
changes. Who reads is activated per request, as Django activates a request's time zone:
`JobMentionsMiddleware` for the API and the pages; a hook's deliveries are said `to_team`.
With no reader active (a management command, the scheduling loop) sentences are said whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.http import HttpRequest, HttpResponse

from controlplane.models import Job
from controlplane.services.access import access_of

# "job 12", "Job 12", "higher-priority job 12", "job 12's reservation", "jobs 12, 15": the forms
# the engine's and the control plane's sentences name jobs in (scheduler_core.sentences.job_names).
_MENTION = re.compile(
    r"\b(?P<adjective>[a-z]+-priority )?(?P<word>[Jj]ob)"
    r"(?:(?P<plural>s) (?P<ids>[0-9]+(?:, [0-9]+)*)|(?P<one> [0-9]+)(?:'s (?P<noun>[a-z]+))?)\b"
)


@dataclass
class JobMentions:
    """One reader's view of the jobs sentences name: `readable_teams` None reads every team."""

    readable_teams: frozenset[int] | None
    _team_of: dict[int, tuple[int, str] | None] = field(default_factory=dict)

    def say(self, text: str) -> str:
        """`text` with every job the reader may not read said as "a job of team T"."""
        if self.readable_teams is None or not text or "ob " not in text and "obs " not in text:
            return text
        matches = list(_MENTION.finditer(text))
        if not matches:
            return text
        self._learn({int(pk) for m in matches for pk in _ids(m)})
        return _said_once(_MENTION.sub(self._said, text))

    def _learn(self, ids: set[int]) -> None:
        """The teams of the named jobs not met yet: one query for a sentence, none after."""
        unknown = ids - self._team_of.keys()
        if not unknown:
            return
        self._team_of.update(dict.fromkeys(unknown))
        for pk, team_id, team in Job.objects.filter(pk__in=unknown).values_list("pk", "team_id", "team__name"):
            self._team_of[pk] = (team_id, team)

    def _hidden_team(self, pk: int) -> str | None:
        """The team a job is said by, or None when the reader may read it (or no such job is
        left: an id that names nothing tells nothing)."""
        known = self._team_of.get(pk)
        if known is None or self.readable_teams is None or known[0] in self.readable_teams:
            return None
        return known[1]

    def _said(self, match: re.Match[str]) -> str:
        ids = [int(pk) for pk in _ids(match)]
        hidden = {pk: team for pk in ids if (team := self._hidden_team(pk)) is not None}
        if not hidden:
            return match.group(0)
        adjective = match.group("adjective") or ""
        if match.group("one"):
            said = f"a {adjective}job of team {hidden[ids[0]]}"
            if match.group("noun"):
                said = f"the {match.group('noun')} of {said}"
            return said[0].upper() + said[1:] if match.group("word") == "Job" else said
        return adjective + _listed([pk for pk in ids if pk not in hidden], list(hidden.values()),
                                   capital=match.group("word") == "Job")


# A clause about a job said by its team, then the same clause again, word for word, once or more:
# "a job of team vision has run 2 s of its 300 s minimum runtime; a job of team vision has run 2 s
# of its 300 s minimum runtime" (the engine named two jobs by id, the reader may read neither).
_ALIKE = re.compile(r"(?P<clause>\b[Aa] (?:[a-z]+-priority )?job of team [^;]+?)(?P<again>(?:; (?P=clause))+)(?=[;.]|$)")


def _said_once(text: str) -> str:
    """Clauses alike said once, with the number of jobs they stand for: "… minimum runtime (3
    such jobs)", where saying each job by its team only made the sentence repeat itself."""
    if "; " not in text:
        return text
    return _ALIKE.sub(lambda m: f"{m.group('clause')} ({1 + m.group('again').count('; ')} such jobs)", text)


def _ids(match: re.Match[str]) -> list[str]:
    return (match.group("ids") or "").split(", ") if match.group("plural") else [match.group("one").strip()]


def _listed(readable: list[int], hidden_teams: list[str], *, capital: bool) -> str:
    """"jobs 12, 15 and 2 jobs of team vision": the readable ones by id, the others counted by
    team, in the order the teams first appear."""
    parts = [(("Job " if capital else "job ") if len(readable) == 1 else ("Jobs " if capital else "jobs "))
             + ", ".join(map(str, readable))] if readable else []
    counts: dict[str, int] = {}
    for team in hidden_teams:
        counts[team] = counts.get(team, 0) + 1
    for team, n in counts.items():
        phrase = f"a job of team {team}" if n == 1 else f"{n} jobs of team {team}"
        parts.append(phrase[0].upper() + phrase[1:] if capital and not parts else phrase)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


_reader: ContextVar[JobMentions | HttpRequest | None] = ContextVar("qm_job_mentions_reader", default=None)


def say(text: str) -> str:
    """`text` as the active reader is told it (whole when no reader is active)."""
    reader = _active()
    return text if reader is None or not text else reader.say(text)


def prefetch(texts: Iterable[str]) -> None:
    """Learn the teams of every job these sentences name in one query, before a page of them
    is said one by one (a list of jobs or events: one query, not one per row)."""
    reader = _active()
    if reader is not None and reader.readable_teams is not None:
        reader._learn({int(pk) for text in texts if text for m in _MENTION.finditer(text) for pk in _ids(m)})


def _active() -> JobMentions | None:
    reader = _reader.get()
    if isinstance(reader, HttpRequest):
        # Resolved at the first sentence, once the request is authenticated: DRF's token
        # authentication sets the user on the request after the middleware has run.
        reader = mentions_of_request(reader)
        _reader.set(reader)
    return reader


def mentions_of_request(request: HttpRequest) -> JobMentions:
    access = access_of(request.user)
    return JobMentions(readable_teams=None if access.is_admin else access.team_ids)


def to_team(team_id: int | None) -> JobMentions:
    """Sentences said to readers of one team only (the deliveries of a team's or a member's
    hook leave the product): jobs of other teams by their team."""
    return JobMentions(readable_teams=frozenset() if team_id is None else frozenset({team_id}))


class JobMentionsMiddleware:
    """Activates the request's reader for every sentence said while answering it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _reader.set(request)
        try:
            return self.get_response(request)
        finally:
            _reader.reset(token)
