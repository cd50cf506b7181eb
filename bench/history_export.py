"""The job history's two downloads, `/history.csv` and `/history.xlsx` as the admin (every ended
job), this tree against another, side by side in one run: seconds, peak RSS, queries, bytes.

    scripts/test-services.sh .venv/bin/python bench/history_export.py --against /tmp/base [--jobs 20000 100000] [--runs 3]

`--against` is another checkout of the project (`git worktree add /tmp/base <commit>`). For each
`--jobs` figure, builds bench/history_cost.py's fleet and jobs with their day rollups and every
ended job's cost remembered, as bench/history_csv.py does. Then, alternated run by run so both
trees see the same load, each tree downloads each file in a fresh process of its own (after a
warm-up download of an empty set of the same format, so modules and the session are loaded):
the seconds to the response's first byte and to its last (a stream read to its end, saved
to a temporary file as it comes rather than held; a response answered whole has its first byte
when its last is ready), the process's peak RSS (VmHWM) before and after, and its queries. Both trees must
write the same CSV, byte for byte, and the same workbook part by part (the times it says it
was made aside): exits 1 otherwise. Prints a table per figure, then all the
medians as one JSON document.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
FORMATS = ("csv", "xlsx")


#: The times a workbook says it was made: the file's (docProps/core.xml) and the About sheet's.
_MADE = re.compile(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*|(Generated \(UTC\)</t></is></c><c [^>]*><is><t>)[^<]*")


def workbook_digest(data: bytes) -> tuple[str, int]:
    """The workbook's parts' sha256, the times it says it was made left out, and its table's rows."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        for info in book.infolist():
            part = _MADE.sub(lambda m: m.group(1) or m.group(2), book.read(info))
            digest.update(info.filename.encode() + b"\0" + part)
        rows = book.read("xl/worksheets/sheet1.xml").count(b"<row ")
    return digest.hexdigest(), rows


def child(form: str) -> None:
    """One download of `/history.<form>` in this process (the tree's root first on sys.path): prints JSON."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    import controlplane
    from bench.history_csv import peak_rss_kb

    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    path = f"/history.{form}"
    warm = client.get(path, {"finished_after": "2100-01-01T00:00"})
    assert warm.status_code == 200, warm.status_code
    if form == "csv":
        for _ in warm.streaming_content:
            pass
    queries = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    rss_before = peak_rss_kb()
    with connection.execute_wrapper(count):
        t0 = time.perf_counter()
        response = client.get(path)
        assert response.status_code == 200, response.status_code
        first_byte = None
        if form == "csv":
            digest, size, rows = hashlib.sha256(), 0, 0
            for chunk in response.streaming_content:
                if first_byte is None and chunk:
                    first_byte = time.perf_counter() - t0
                digest.update(chunk)
                size += len(chunk)
                rows += chunk.count(b"\n")
            seconds = time.perf_counter() - t0
            sha = digest.hexdigest()
            rss_peak = peak_rss_kb()
        else:
            with tempfile.TemporaryFile() as saved:
                if response.streaming:
                    for chunk in response.streaming_content:
                        if first_byte is None and chunk:
                            first_byte = time.perf_counter() - t0
                        saved.write(chunk)
                else:  # answered whole: its first byte leaves with its last
                    saved.write(response.content)
                seconds = time.perf_counter() - t0
                first_byte = seconds if first_byte is None else first_byte
                # before the check below, which reads the file back and unzips the table's XML
                rss_peak = peak_rss_kb()
                size = saved.tell()
                saved.seek(0)
                sha, rows = workbook_digest(saved.read())
    print(json.dumps({"seconds": seconds, "first_byte_s": first_byte, "rss_before_kb": rss_before, "rss_peak_kb": rss_peak, "queries": queries,
                      "bytes": size, "rows": rows, "sha256": sha, "code": controlplane.__file__}))


def download(tree: Path, form: str) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), form]
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(tree)})
    if done.returncode:
        raise SystemExit(f"{tree} {form}: exit {done.returncode}\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"].startswith(str(tree)), (result["code"], tree)  # that tree's code ran
    return result


def main() -> int:
    if "--child" in sys.argv:
        at = sys.argv.index("--child")
        sys.path.insert(0, sys.argv[at + 1])
        child(sys.argv[at + 2])
        return 0
    sys.path.insert(0, str(REPO))
    from bench.history_csv import build_history, prepare_database, tree_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    tree_arguments(parser)
    args = parser.parse_args()
    prepare_database("bench/history_export.py")
    trees = {"before": args.against.resolve(), "after": REPO}
    ways = [(tree, form) for form in FORMATS for tree in trees]
    ok = True
    report: dict[str, Any] = {"against": str(trees["before"]), "runs": args.runs, "jobs": {}}
    for count in args.jobs:
        data, _, built_s = build_history(count, args.days, args.seed)
        loads = [os.getloadavg()[0]]
        results: dict[tuple[str, str], list[dict[str, Any]]] = {way: [] for way in ways}
        for run in range(args.runs):
            for tree, form in ways if run % 2 == 0 else ways[::-1]:
                results[(tree, form)].append(download(trees[tree], form))
        loads.append(os.getloadavg()[0])
        print(f"\n{data['jobs']:,} ended jobs over {args.days} days (built in {built_s:.0f} s); load average "
              f"{' → '.join(f'{x:.1f}' for x in loads)}; {args.runs} runs each, alternated")
        print(f"{'admin, every job':22s} {'p50 s':>7s} {'min s':>7s} {'max s':>7s} {'1st B s':>8s} {'queries':>8s} "
              f"{'RSS MiB':>8s} {'peak MiB':>9s} {'MiB':>6s} {'rows':>8s}  sha256")
        figures: dict[str, Any] = {}
        for form in FORMATS:
            digests = set()
            for tree in trees:
                runs = results[(tree, form)]
                seconds = [r["seconds"] for r in runs]
                row = {"seconds_p50": round(statistics.median(seconds), 2), "seconds_min": round(min(seconds), 2),
                       "seconds_max": round(max(seconds), 2),
                       "first_byte_s_p50": round(statistics.median(r["first_byte_s"] for r in runs), 2),
                       "queries": max(r["queries"] for r in runs),
                       "rss_before_mib": round(statistics.median(r["rss_before_kb"] for r in runs) / 1024, 1),
                       "rss_peak_mib": round(max(r["rss_peak_kb"] for r in runs) / 1024, 1),
                       "mib": round(runs[0]["bytes"] / 2**20, 1), "rows": runs[0]["rows"]}
                figures[f"{form} {tree}"] = row
                print(f"{f'/history.{form} {tree}':22s} {row['seconds_p50']:7.2f} {row['seconds_min']:7.2f} "
                      f"{row['seconds_max']:7.2f} {row['first_byte_s_p50']:8.2f} {row['queries']:8d} {row['rss_before_mib']:8.1f} "
                      f"{row['rss_peak_mib']:9.1f} {row['mib']:6.1f} {row['rows']:8,d}  {runs[0]['sha256'][:16]}")
                digests |= {r["sha256"] for r in runs}
            same = len(digests) == 1
            ok &= same
            print(f"/history.{form}: {'the same' if same else 'DIFFERENT'} in both trees")
        report["jobs"][str(data["jobs"])] = {"load_average": [round(x, 1) for x in loads], **figures}
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
