"""How a quota's "lent now" and its limits are said, in one place: `qm quotas` (LENT NOW, MAY
BORROW, MAY LEND), the teams page and the admin's quota list and cohort page. `qm` imports no Django, and neither does this module.

GPUs are lent whole, but not by one team: the GPUs a team borrows are charged by the engine to
the idle guarantees of every team of its cohort leaving guaranteed GPUs of that type idle,
together (scheduler_core's QuotaLedger), and quotas.lent_now
splits them as the accounting does (usage_tiers.idle_guarantees), in proportion to what each may lend.
Three equal lenders of 8 borrowed GPUs lend 8/3 each: said `≈2.7`, with LENT_SHARE_NOTE, so it
does not read as 2.7 GPUs lent.
"""

from __future__ import annotations

#: What `≈` means, said once wherever a lent share is shown.
LENT_SHARE_NOTE = (
    "≈: a share, not a count of GPUs. A borrower runs on whole GPUs, lent by every team of its cohort leaving "
    "guaranteed GPUs of that type idle, together, each lender's share in proportion to what each may lend (the "
    "engine admits borrowing only against what the cohort's teams lend, whatever the fleet holds beyond the "
    "guarantees). The shares add up to the GPUs the cohort's teams borrow.")


def lent_said(gpus: float) -> str:
    """A team's lent GPUs to one decimal, as the API gives `lent_gpus`: a whole count as it is
    (8), a share that is no whole GPU marked `≈` (≈2.7)."""
    shown = round(float(gpus), 1) + 0.0  # + 0.0: never "-0"
    return f"{shown:g}" if shown.is_integer() else f"≈{shown:g}"


def lent_beyond(gpus: float, lending_limit: int | None, in_cohort: bool) -> float:
    """How much of what a team lends now passes its lending limit, to one decimal (0.0 within
    it): a limit lowered under the borrowers keeps what they run on lent (quotas.
    lent_beyond_lending_limit, the save's warning), as a borrowing limit lowered under a borrower
    keeps what it holds."""
    if not in_cohort or lending_limit is None:
        return 0.0
    beyond = round(float(gpus) - lending_limit, 1) + 0.0
    return beyond if beyond > 0 else 0.0


def lent_within_limit_said(gpus: float, lending_limit: int | None, in_cohort: bool) -> str:
    """`lent_said`, with how far it passes the lending limit when it does: "8 (5 over its
    lending limit 3)", as a borrower over its limit reads "12 (8 over its borrowing limit 4)"."""
    beyond = lent_beyond(gpus, lending_limit, in_cohort)
    if not beyond:
        return lent_said(gpus)
    return f"{lent_said(gpus)} ({lent_said(beyond)} over its lending limit {lending_limit})"


def borrowed_within_limit_said(gpus: int, borrowing_limit: int | None) -> str:
    """What a team holds above its nominal, with how far it passes its borrowing limit when it
    does (the limit or the nominal lowered under what it runs, which it keeps): "8 (5 over its
    borrowing limit 3)". The admin's quota list and `qm quotas` say it so."""
    if borrowing_limit is None or gpus <= borrowing_limit:
        return str(gpus)
    return f"{gpus} ({gpus - borrowing_limit} over its borrowing limit {borrowing_limit})"


def is_share(gpus: float) -> bool:
    """Whether `lent_said` marks it: the note is due."""
    return lent_said(gpus).startswith("≈")


def limit_said(limit: int | None, in_cohort: bool) -> str:
    """A borrowing or lending limit: an empty one is unlimited ("none" alone would read as zero),
    but a team in no cohort borrows and lends nothing whatever its limits say (the engine's ledger
    gives it nothing beyond nominal): "none (no cohort)", where "no limit" read as the opposite."""
    if not in_cohort:
        return "none (no cohort)"
    return "no limit" if limit is None else str(limit)
