"""The GPU activity the node agents report (`UsageSample`: an allocation's GPUs × device
activity over an interval), cut exactly at time buckets' bounds in one grouped SQL query
(`grouped`), and folded hour by hour into `NodeActivityRollup` by the accounting run
(`fold_node_activity`, called by services/accounting.roll_up). services/node_tiers.py reads a
node's active tier through the same cutting; this module depends on neither of them.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection
from django.db.models import F, Max, Min

from controlplane.models import AccountingCursor, NodeActivityRollup, UsageSample
from controlplane.services.usage_tiers import from_us

US = 1_000_000
HOUR = 3600


def epoch_seconds(column: str) -> str:
    """SQL for a timestamp column as seconds since the epoch, a float, on either database."""
    if connection.vendor == "postgresql":
        return f"date_part('epoch', {column})"  # float8 already (EXTRACT is numeric, several times slower)
    return f"((julianday({column}) - 2440587.5) * 86400.0)"  # SQLite: exact to about 0.1 ms


def sample_arm(where: str, params: list[object], lo_us: int, hi_us: int, *, by_node: bool = False
               ) -> tuple[str, list[object]]:
    """The samples `where` selects, as (node,) allocation, weight (GPUs × activity) and the
    interval's ends in epoch seconds, cut to [lo, hi)."""
    greatest, least = ("GREATEST", "LEAST") if connection.vendor == "postgresql" else ("MAX", "MIN")
    table = connection.ops.quote_name(UsageSample._meta.db_table)
    return (f"SELECT {'node_id AS n, ' if by_node else ''}allocation_id AS a, gpus * gpu_activity AS w, "
            f"{greatest}({epoch_seconds('started_at')}, %s) AS s0, {least}({epoch_seconds('ended_at')}, %s) AS s1 "
            f"FROM {table} WHERE {where}", [lo_us / US, hi_us / US, *params])


def fold_node_activity(cursor: AccountingCursor, through_id: int, limit: int = 1_000_000) -> int:
    """Add the samples with ids in (cursor.last_node_sample_id, through_id] — at most `limit`
    ids of that range from its first sample on, the rest is the next run's — to
    `NodeActivityRollup`, each cut at the UTC hours' bounds, and move the cursor's id and
    longest sample on (the caller saves it). From id 0 (a new cursor) the rows are rebuilt.
    Returns the rows written. Called by the accounting run (services/accounting.roll_up) under
    its cursor lock, in its transaction."""
    after_id = cursor.last_node_sample_id
    # The limit counts from the first sample above the cursor: ids have gaps (raw samples pruned
    # after their retention, inserts rolled back), and a gap as wide as the limit made a run that
    # folded nothing (a new cursor over samples whose ids are all past a million, 7 Dec).
    first = UsageSample.objects.filter(id__gt=after_id, id__lte=through_id).aggregate(m=Min("id"))["m"]
    through_id = min(through_id, (after_id if first is None else first - 1) + limit)
    if through_id <= after_id:
        return 0
    if after_id == 0:
        NodeActivityRollup.objects.all().delete()
        cursor.longest_node_sample_s = 0.0
    new = UsageSample.objects.filter(id__gt=after_id, id__lte=through_id)
    longest = new.aggregate(m=Max(F("ended_at") - F("started_at")))["m"]
    cells = grouped([sample_arm("id > %s AND id <= %s", [after_id, through_id], 0, 10**11 * US, by_node=True)],
                     HOUR, by_node=True)
    table = connection.ops.quote_name(NodeActivityRollup._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    rows = [(n, a, adapt(from_us(k * HOUR * US)), gpu_us / US) for (n, a, k), gpu_us in cells.items()]
    with connection.cursor() as db:
        for i in range(0, len(rows), 200):  # 800 parameters a statement: within SQLite's oldest limit
            batch = rows[i:i + 200]
            db.execute(
                f"INSERT INTO {table} (node_id, allocation_id, start, active_gpu_seconds) VALUES "
                + ", ".join(["(%s, %s, %s, %s)"] * len(batch))
                + " ON CONFLICT (node_id, start, allocation_id) DO UPDATE "
                f"SET active_gpu_seconds = {table}.active_gpu_seconds + excluded.active_gpu_seconds",
                [x for row in batch for x in row],
            )
    cursor.last_node_sample_id = through_id
    if longest is not None:
        cursor.longest_node_sample_s = max(cursor.longest_node_sample_s, longest.total_seconds())
    return len(cells)


def grouped(arms: list[tuple[str, list[object]]], bucket: int, *, by_node: bool = False
            ) -> dict[tuple[int, int, int], float]:
    """GPU-µs × activity per (node or 0, allocation, bucket number) of the intervals the arms
    select (each a query of (node,) allocation, weight and ends in epoch seconds, disjoint in
    time), cut at the buckets' bounds, exactly, in one grouped query.

    Intervals are grouped by allocation and by the buckets k0 and k1 their start and end fall
    in, with W = Σ GPUs × activity and the offsets of their ends into those buckets, R0 = Σ W·(s0
    − k0·L) and R1 = Σ W·(s1 − k1·L). A group inside one bucket (k0 = k1) is R1 − R0 there; one
    that crosses bounds gives W·L − R0 to k0, W·L to each bucket between and R1 to k1. Offsets
    into a bucket stay small, so summing them in floating point loses nothing that matters."""
    if connection.vendor == "postgresql":
        # OFFSET 0 keeps the inner query whole, so each row's instants are computed once, not at
        # every use.
        floor, fence = "FLOOR({})", " OFFSET 0"
    else:  # SQLite, the embedded demo's database
        floor, fence = "CAST({} AS INTEGER)", ""
    length = float(bucket)
    n = "n, " if by_node else ""
    union = " UNION ALL ".join(f"({sql}{fence})" if fence and len(arms) > 1 else f"{sql}{fence}" for sql, _ in arms)
    sql = (
        f"SELECT {n}a, k0, k1, SUM(w), SUM(w * (s0 - k0 * %s)), SUM(w * (s1 - k1 * %s)) FROM ("
        f"SELECT {n}a, w, s0, s1, {floor.format('s0 / %s')} AS k0, {floor.format('s1 / %s')} AS k1 FROM ("
        f"{union}) AS cut WHERE s1 > s0{fence}) AS placed GROUP BY {n}a, k0, k1"
    )
    out: dict[tuple[int, int, int], float] = defaultdict(float)
    with connection.cursor() as cursor:
        cursor.execute(sql, [length, length, length, length, *(p for _, params in arms for p in params)])
        for row in cursor.fetchall():
            node_id = int(row[0]) if by_node else 0
            a, k0, k1, w, r0, r1 = row[1:] if by_node else row
            a, k0, k1, w, r0, r1 = int(a), int(k0), int(k1), float(w), float(r0), float(r1)
            if k0 == k1:
                out[(node_id, a, k0)] += (r1 - r0) * US
                continue
            out[(node_id, a, k0)] += (w * length - r0) * US
            for k in range(k0 + 1, k1):
                out[(node_id, a, k)] += w * length * US
            if r1 > 0:
                out[(node_id, a, k1)] += r1 * US
    return out
