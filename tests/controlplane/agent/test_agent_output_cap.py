"""A rank's output a node keeps is capped (qm-agent --max-rank-output-mib): a rank printing
faster than its output ships, or a run whose output is never shipped (--no-output), no longer
fills the node's disk, and what was dropped is said in the job's output.

Found on 5 Dec: the agent gave the disk back only bytes the control plane had taken, so a rank
printing faster than ~1.8 MiB/s (the shipping rate of one rank, bench/agent_output_rate.py)
and every rank of a --no-output agent grew its file for as long as it printed. Real processes,
the real agent loop and, for the job's output, the real API on PostgreSQL.

Each test its own node name: a member that ends kills every process carrying its node's name
and its run's generation (members.marked_processes), and two of these tests side by side on
two workers (-n 2 hands out tests, not files) had the same, generation 7 on node gpu-cap: one's
end killed the other's printer (test_a_slow_printer_loses_nothing shipped "line 1" and no more)."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.logs import RANK_BYTES, RECORD_NAME, Chunk, LogShipper, read_record, write_record
from controlplane.agent.members import TRIM_EVERY_S, ProcessLauncher, ProcessMember, punch_hole
from controlplane.agent.node import NodeAgent, NodeInventory
from controlplane.api.agent import LogChunkSerializer
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_agent_ships_logs import RecordingClient, drive, output
from tests.controlplane.agent.test_process_member import assignment, wait_exit
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job

MIB = 1024 * 1024
CAP = 1 * MIB
# 6,000,000 bytes of 10-byte lines, at once: far faster than a rank ships
FAST = "yes '123456789' | head -c 6000000"


def on_disk(path: Path) -> int:
    """The bytes `path` holds on the disk (holes punched in it excluded)."""
    return path.stat().st_blocks * 512


def test_a_run_whose_output_is_not_shipped_keeps_only_its_last_cap_on_the_disk(tmp_path: Path) -> None:
    member = ProcessMember(assignment(f"{FAST}; sleep 1"), workdir=tmp_path, node_name="gpu-cap-nout", devices=None,
                           output_cap=CAP)
    assert wait_exit(member) == 0
    rank_file = tmp_path / "rank0.log"
    assert rank_file.stat().st_size == 6_000_000, "the file keeps its length and offsets"
    assert on_disk(rank_file) <= CAP + CAP // 4 + 64 * 1024
    # the last CAP bytes are whole: the newest output is what a node keeps
    with open(rank_file, "rb") as f:
        f.seek(6_000_000 - CAP)
        assert b"\0" not in f.read()


def test_a_fast_printers_file_holds_at_most_its_cap_a_quarter_and_what_it_printed_since_the_last_look(
        tmp_path: Path) -> None:
    """The documented bound (docs/operations.md, *Disk*), which is not a strict one: the job
    writes its file itself, so between two of the agent's looks (every TRIM_EVERY_S) a rank can
    put any amount on the disk. At every moment the file holds at most CAP + CAP/4, plus what
    it printed since the agent last looked, plus a block at each edge of the hole."""
    # 40 MB in bursts of 1 MB for two seconds or more: ~20 MB/s, ten times what a rank ships
    member = ProcessMember(assignment("for i in $(seq 40); do yes '123456789' | head -c 1000000; sleep 0.05; done"),
                           workdir=tmp_path, node_name="gpu-cap-bound", devices=None, output_cap=CAP)
    rank_file = tmp_path / "rank0.log"
    polls: list[tuple[float, int]] = []  # (when, the file's length) just before each poll
    most = 0
    while True:
        polls.append((time.monotonic(), rank_file.stat().st_size if rank_file.exists() else 0))
        if member.poll() is not None:
            break
        now, size, held = time.monotonic(), rank_file.stat().st_size, on_disk(rank_file)
        # the last look was in one of the polls since TRIM_EVERY_S ago, give or take a poll
        gap = max(b[0] - a[0] for a, b in zip(polls, polls[1:], strict=False)) if len(polls) > 1 else 0.0
        since = min(length for at, length in polls if at >= now - TRIM_EVERY_S - gap - 0.01)
        assert held <= CAP + CAP // 4 + (size - since) + 8192, (held, size, since)
        most = max(most, held)
        time.sleep(0.005)
    assert rank_file.stat().st_size == 40_000_000
    assert CAP + CAP // 4 + 8192 < most < 20_000_000, "past cap + a quarter between looks, never all of it"
    assert on_disk(rank_file) <= CAP + 64 * 1024, "once over, its last CAP bytes only (and the extent tree)"


def test_a_rank_that_prints_a_burst_and_exits_at_once_keeps_only_its_cap(tmp_path: Path) -> None:
    # Before, the cap was looked at only every 0.5 s while the member ran: a burst printed in
    # its last moments stayed whole on the disk.
    member = ProcessMember(assignment(FAST), workdir=tmp_path, node_name="gpu-cap-burst", devices=None, output_cap=CAP)
    assert wait_exit(member) == 0
    rank_file = tmp_path / "rank0.log"
    assert rank_file.stat().st_size == 6_000_000
    assert on_disk(rank_file) <= CAP + 64 * 1024
    with open(rank_file, "rb") as f:
        f.seek(6_000_000 - CAP)
        assert b"\0" not in f.read()


def accepted(chunks: list[Chunk]) -> list[Chunk]:
    """`chunks`, each checked as the control plane checks a contact's (one it refuses, it
    refuses the whole contact: heartbeat, exits and all)."""
    for chunk in chunks:
        checked = LogChunkSerializer(data=chunk.as_json())
        assert checked.is_valid(), (checked.errors, chunk)
    return chunks


def test_a_few_bytes_dropped_after_the_cap_was_reached_leave_the_contact_one_the_control_plane_takes(
        tmp_path: Path) -> None:
    # Seen on a loaded machine (the burst printed in pieces, the cap's worth not yet shipped
    # when the rank printed its last line): the shipper said the 14 bytes that line pushed past
    # the cap dropped with a 200-character line standing for 14 bytes; the control plane refused
    # every contact after it (more characters than bytes), exits included, and the job never ended.
    trigger = tmp_path / "print-the-last-line"
    member = ProcessMember(
        assignment(f"yes '123456789' | head -c 3000000; while [ ! -e {trigger} ]; do sleep 0.05; done; "
                   "echo 'the last line'"),
        workdir=tmp_path, node_name="gpu-cap-few", devices=None, output_cap=CAP)
    shipper = LogShipper()
    shipper.watch(7, member)
    rank_file = tmp_path / "rank0.log"
    wait_for(lambda: rank_file.stat().st_size == 3_000_000, 60, "the burst on the disk")
    (line,) = accepted(shipper.collect())
    assert line.text.startswith(f"\n[qm-agent: {3_000_000 - CAP:,} bytes of rank 0's output dropped")
    shipper.delivered([line])
    trigger.touch()
    assert wait_exit(member, 60) == 0  # its last trim gives back all but the last CAP bytes
    shipper.ended(7)
    texts: list[str] = []
    while shipper.cursors:
        chunks = accepted(shipper.collect())
        texts.extend(c.text for c in chunks)
        shipper.delivered(chunks)
    text = "".join(texts)
    assert "\ufffd" not in text, "the bytes given back were not sent as text"
    printed = "123456789\n" * 300_000 + "the last line\n"
    assert text == printed[-CAP:], "the newest CAP bytes, whole, after the bytes said dropped"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ship", [False, True], ids=["no-output", "shipped"])
def test_a_real_agent_keeps_a_fast_ranks_file_within_its_cap(live_server: Any, tmp_path: Path, state_dir: Path,
                                                              submitter: Any, ship: bool) -> None:
    """`qm-agent --max-rank-output-mib 1` (and `--no-output`): the flag reaches the runs, the
    file stays within the cap on the disk, the agent logs it, and a shipped run's output says
    how many bytes were dropped."""
    fleet = build_loop_fleet()
    node = "gpu-capped" if ship else "gpu-capped-nout"
    log_path = tmp_path / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    options = ["--no-wake", "--max-rank-output-mib", "1", *([] if ship else ["--no-output"])]
    agent = start_agent(live_server.url, state_dir, node, log, options=options)
    try:
        wait_for(lambda: Node.objects.filter(name=node, state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, gpus=1, command=f"{FAST}; sleep 1; echo 'the last line'", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, "the job to end")
        generation = Allocation.objects.get(job=job).generation
        rank_file = state_dir / node / f"g{generation}" / "rank0.log"
        assert rank_file.stat().st_size == 6_000_000 + len("the last line\n")
        assert on_disk(rank_file) <= CAP + 128 * 1024
        with open(rank_file, "rb") as f:
            f.seek(rank_file.stat().st_size - CAP)
            assert b"\0" not in f.read(), "the last cap's worth is whole"
        if ship:
            wait_for(lambda: output(job).endswith("the last line\n"), 60, "the output's end")
            text = output(job)
            # (a loaded machine prints the burst slowly: it may be dropped in more than one gap)
            gaps = [int(part.split(" bytes of rank 0")[0].replace(",", "")) for part in text.split("[qm-agent: ")[1:]]
            assert gaps and sum(gaps) <= 6_000_000 - CAP, "nothing within the cap is dropped"
            # the newest output arrived whole, after where the dropped bytes began
            assert text.endswith("123456789\n" * (CAP // 10 - 2) + "the last line\n")
            assert text.index("[qm-agent: ") < text.index("never received …]")
        wait_for(lambda: b"given back to the disk" in log_path.read_bytes(), 30, "the agent's log line")
    finally:
        stop_agent(agent)
        log.close()
    said = log_path.read_text()
    assert "a rank's output passed the node's cap: its oldest bytes given back to the disk" in said
    assert "cap_bytes=1048576" in said
    if ship:
        assert "its oldest unsent output dropped" in said


def test_an_agent_recovering_a_capped_run_says_what_was_dropped_and_sends_no_nul(tmp_path: Path) -> None:
    # A run whose rank was far behind when its agent was killed: the member had given back all
    # but the file's last CAP bytes. Before, the next agent shipped those holes as text
    # (millions of U+FFFD) and said nothing of what was lost.
    launcher = ProcessLauncher(tmp_path, "gpu-rec", devices=None, cgroup_root="off", output_cap=CAP)
    workdir = launcher.root / "g5"
    workdir.mkdir(parents=True)
    rank_file = workdir / "rank0.log"
    rank_file.write_bytes(b"123456789\n" * 300_000)
    punch_hole(rank_file, 3_000_000 - CAP)
    write_record(workdir / RECORD_NAME, 5, {0: (0, 0)})
    shipper = LogShipper()
    for run in launcher.unshipped_output():
        shipper.recover(run)
    texts: list[str] = []
    while shipper.cursors:
        chunks = shipper.collect()
        texts.extend(c.text for c in chunks)
        shipper.delivered(chunks)
    text = "".join(texts)
    assert "\ufffd" not in text
    assert text.startswith(f"\n[qm-agent: {3_000_000 - CAP:,} bytes of rank 0's output dropped on the node")
    assert text.endswith("123456789\n" * (CAP // 10))


def _recovered_text(launcher: ProcessLauncher) -> str:
    shipper = LogShipper()
    for run in launcher.unshipped_output():
        shipper.recover(run)
    texts: list[str] = []
    while shipper.cursors:
        chunks = accepted(shipper.collect())
        texts.extend(c.text for c in chunks)
        shipper.delivered(chunks)
    return "".join(texts)


def _capped_run(launcher: ProcessLauncher, ranks: dict[int, tuple[int, int]], cap: int | None) -> None:
    """Run g5's rank 0 printed 3,000,000 bytes and was kept to `CAP` (all before its last CAP
    bytes given back to the disk); its record says `ranks` and the cap it was launched with."""
    workdir = launcher.root / "g5"
    workdir.mkdir(parents=True)
    rank_file = workdir / "rank0.log"
    rank_file.write_bytes(b"123456789\n" * 300_000)
    punch_hole(rank_file, 3_000_000 - CAP)
    write_record(workdir / RECORD_NAME, 5, ranks, cap=cap)


@pytest.mark.parametrize("now", [4 * CAP, None], ids=["bigger-cap", "no-cap"])
def test_recovery_keeps_to_the_cap_the_run_was_launched_with(tmp_path: Path, now: int | None) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-rec", devices=None, cgroup_root="off", output_cap=now)
    _capped_run(launcher, {0: (0, 0)}, CAP)
    text = _recovered_text(launcher)
    assert "\ufffd" not in text
    assert dropped(text) == [(3_000_000 - CAP, 0)]
    assert text.endswith("123456789\n" * (CAP // 10))


def test_recovery_with_a_smaller_cap_now_drops_to_it(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-rec", devices=None, cgroup_root="off", output_cap=CAP // 2)
    _capped_run(launcher, {0: (0, 0)}, CAP)
    text = _recovered_text(launcher)
    assert dropped(text) == [(3_000_000 - CAP // 2, 0)]
    assert "the node keeps at most the last 524,288 bytes" in text


def test_a_chunk_in_flight_over_bytes_given_back_is_said_dropped_not_resent(tmp_path: Path) -> None:
    # The agent read [0, 65536) and sent it; then the rank printed on, the member gave back all
    # but its last CAP bytes, those 64 KiB among them, and the agent died before the reply. The
    # next agent resent them from the disk: 65,536 U+FFFD. (A control plane that did not take
    # them shows both lines, as here; one that did drops the first as a resend, and the second
    # is where it holds nothing: test_agent_dropped_line_survives_restart.py.)
    launcher = ProcessLauncher(tmp_path, "gpu-rec", devices=None, cgroup_root="off", output_cap=CAP)
    _capped_run(launcher, {0: (0, 65536)}, CAP)
    text = _recovered_text(launcher)
    assert "\ufffd" not in text
    assert dropped(text) == [(65536, 0), (3_000_000 - CAP - 65536, 0)]
    assert text.endswith("123456789\n" * (CAP // 10))


def test_a_chunk_in_flight_over_a_few_bytes_given_back_leaves_a_contact_the_control_plane_takes(
        tmp_path: Path) -> None:
    # The chunk in flight began 12 bytes before the last CAP: those 12 were given back, too few
    # for the line saying so to stand for (the control plane refuses a chunk with more
    # characters than bytes, and the whole contact with it).
    launcher = ProcessLauncher(tmp_path, "gpu-rec", devices=None, cgroup_root="off", output_cap=CAP)
    kept_from = 3_000_000 - CAP
    _capped_run(launcher, {0: (kept_from - 12, kept_from - 12 + 65536)}, CAP)
    text = _recovered_text(launcher)
    assert "\ufffd" not in text
    assert text == ("123456789\n" * 300_000)[-CAP:], "the last CAP bytes, whole"


def test_a_runs_record_keeps_the_cap_it_was_launched_with(tmp_path: Path) -> None:
    member = ProcessMember(assignment("echo one; echo two"), workdir=tmp_path, node_name="gpu-cap-record", devices=None,
                           output_cap=CAP)
    shipper = LogShipper()
    shipper.watch(7, member)
    assert read_record(tmp_path / RECORD_NAME) == (7, {0: (0, 0)}, False, CAP)
    assert wait_exit(member) == 0
    shipper.ended(7)
    while shipper.cursors:
        chunks = shipper.collect()
        assert read_record(tmp_path / RECORD_NAME).cap == CAP  # type: ignore[union-attr]
        shipper.delivered(chunks)
    assert read_record(tmp_path / RECORD_NAME) == (7, {}, True, CAP)


def test_a_slow_printer_loses_nothing(tmp_path: Path) -> None:
    member = ProcessMember(assignment("for i in $(seq 1 40); do echo \"line $i\"; sleep 0.01; done"),
                           workdir=tmp_path, node_name="gpu-cap-slow", devices=None, output_cap=CAP)
    shipper = LogShipper()
    shipper.watch(7, member)
    shipped: list[str] = []
    while member.poll() is None or shipper.cursors:
        if member.poll() is not None:
            shipper.ended(7)
        chunks = shipper.collect()
        shipped.extend(c.text for c in chunks)
        shipper.delivered(chunks)
        time.sleep(0.02)
    assert "".join(shipped) == "".join(f"line {i}\n" for i in range(1, 41))
    assert all(c.dropped == 0 for c in shipper.cursors.values())


@pytest.mark.django_db(transaction=True)
def test_a_rank_printing_faster_than_it_ships_keeps_its_cap_and_the_job_output_says_what_was_dropped(
    live_server: Any, tmp_path: Path
) -> None:
    fleet = build_loop_fleet()
    inventory = NodeInventory(name="gpu-cap", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                              memory_gb=512, leaf_switch="leaf-1", spine="spine-1")
    client = RecordingClient(live_server.url)
    agent = NodeAgent(inventory, client=client,
                      launcher=ProcessLauncher(tmp_path, "gpu-cap", devices=None, output_cap=CAP),
                      bootstrap_token=BOOTSTRAP, interval_s=0.3, sample_interval_s=5.0)
    drive(agent, lambda: Node.objects.filter(name="gpu-cap", state=NodeState.READY).exists())
    job = make_job(fleet, command=f"{FAST}; sleep 2; echo 'the last line'")
    cycle.run_cycle("test")
    drive(agent, lambda: Allocation.objects.filter(job=job).exists() and agent.members)
    generation = Allocation.objects.get(job=job).generation
    rank_file = tmp_path / "gpu-cap" / f"g{generation}" / "rank0.log"
    wait_for_size(agent, rank_file, 6_000_000)

    drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED and not agent.shipper.cursors,
          timeout=30)

    assert on_disk(rank_file) <= CAP + CAP // 4 + 128 * 1024
    text = output(job)
    assert text.endswith("123456789\nthe last line\n")
    # each chunk once (a contact's chunks are resent until taken), by where it begins
    sent = {c["offset"]: c for body in client.bodies for c in body.get("logs", [])}
    dropped = [c for c in sent.values() if "qm-agent:" in c["text"]]
    assert dropped, "what was dropped is said"
    gaps = [int(c["text"].split(" bytes of rank 0")[0].split("qm-agent: ")[1].replace(",", "")) for c in dropped]
    # the counts are right: what the lines say was dropped and what was shipped are all it printed
    # but a gap too short for its line (a loaded machine prints the burst slowly: it may be
    # dropped in more than one gap, and the last line after the cap's worth was reached)
    shipped = sum(c["bytes"] for c in sent.values() if c not in dropped)
    assert 0 <= 6_000_000 + len("the last line\n") - sum(gaps) - shipped < SHORTER_THAN_ITS_LINE
    assert sum(gaps) <= 6_000_000 - CAP, "nothing within the cap is dropped"
    for gap in gaps:
        assert (f"{gap:,} bytes of rank 0's output dropped on the node: it printed faster than they could be shipped, "
                "and the node keeps at most the last 1 MiB") in text
    # where the dropped bytes began, the line saying so, then the gap as any reader shows one
    assert text.index("[qm-agent: ") < text.index("never received …]")
    assert text.endswith("123456789\n" * (CAP // 10 - 2) + "the last line\n")


def wait_for_size(agent: NodeAgent, path: Path, size: int) -> None:
    """Step the agent until `path` holds `size` bytes (the printer has printed all)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size >= size:
            return
        time.sleep(min(agent.step(), 0.02))
    raise AssertionError(f"{path} never reached {size} bytes")


#: A gap of fewer bytes than the line that would say it was dropped (~210 characters) is sent
#: nothing (agent/logs.py, Cursor.notice): the output shows it "never received" only.
SHORTER_THAN_ITS_LINE = 256
DROPPED = re.compile(r"\[qm-agent: ([\d,]+) bytes of rank (\d+)'s output dropped on the node")
NEVER_RECEIVED = re.compile(r"\n\[… ([\d,]+) bytes? never received …\]\n")


def dropped(text: str) -> list[tuple[int, int]]:
    """(bytes, rank) of each line in `text` saying a rank's output was dropped."""
    return [(int(n.replace(",", "")), int(rank)) for n, rank in DROPPED.findall(text)]


def received_bytes(text: str) -> int:
    """The bytes of a rank's output `text` (read from offset 0) that are the rank's own: all
    but the dropped lines and the gaps' placeholders."""
    own = NEVER_RECEIVED.sub("", re.sub(r"\n\[qm-agent: [^\]]*\]\n", "", text))
    return len(own.encode())


@pytest.mark.django_db(transaction=True)
def test_an_agent_restarted_with_a_bigger_cap_drops_what_the_first_gave_back_and_sends_no_nul(
    live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any
) -> None:
    """Launched with a 1 MiB cap, the rank printed 3.5 MB while its agent was cut off, and the
    member gave all but the last 1 MiB back to the disk; the agent was killed with SIGKILL and
    a new one started with a 4 MiB cap. Before, the new agent kept to its own cap and shipped the
    2.5 MB hole as text: 2.5 million U+FFFD. Now the run's record says the cap it was launched
    with, and the new agent drops that span and says so."""
    fleet = build_loop_fleet()
    state = state_dir
    trigger = state_dir / "print-now"  # where the job, run as its submitter, can look (tmp_path is 0700)
    log_path = tmp_path / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    first = start_agent(live_server.url, state, "gpu-recap", log, options=["--no-wake", "--max-rank-output-mib", "1"])
    second = None
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-recap", state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, gpus=1, command=(
            f"echo start; while [ ! -e {trigger} ]; do sleep 0.05; done; "
            "yes '123456789' | head -c 3500000; echo 'the last line'; exec sleep 600"), submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        generation = Allocation.objects.get(job=job).generation
        wait_for(lambda: output(job) == "start\n", 60, "the first line shipped")

        first.send_signal(signal.SIGUSR1)  # cut off: nothing more is shipped
        wait_for(lambda: b"partitioned" in log_path.read_bytes(), 30, "the partition")
        trigger.touch()
        rank_file = state / "gpu-recap" / f"g{generation}" / "rank0.log"
        size = len("start\n") + 3_500_000 + len("the last line\n")
        wait_for(lambda: rank_file.stat().st_size == size, 60, "the burst on the disk")
        wait_for(lambda: on_disk(rank_file) <= CAP + CAP // 4 + 64 * 1024, 30, "the member to give back all but its cap")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert output(job) == "start\n", "nothing of the burst was shipped"

        second = start_agent(live_server.url, state, "gpu-recap", log,
                             options=["--no-wake", "--max-rank-output-mib", "4"])
        wait_for(lambda: output(job).endswith("the last line\n"), 60, "the rest of the output")
        text = output(job)
    finally:
        for agent in (first, second):
            if agent is not None:
                stop_agent(agent)
        log.close()
    assert "\ufffd" not in text, "the span given back to the disk was shipped as text"
    assert dropped(text) == [(size - CAP - len("start\n"), 0)]
    assert "the node keeps at most the last 1 MiB of a rank's unshipped output" in text
    assert text.startswith("start\n\n[qm-agent: ")
    assert text.endswith("123456789\n" * (CAP // 10 - 2) + "the last line\n")
    assert received_bytes(text) + size - CAP - len("start\n") == size



@pytest.mark.django_db(transaction=True)
def test_a_real_agent_caps_each_rank_of_a_two_rank_job_and_says_which_rank_lost_what(
    live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any
) -> None:
    """Two ranks each print 4 MB at once past a 1 MiB cap: each rank's dropped lines name that
    rank, the bytes they say were dropped and those received are all that rank printed, and
    each rank's newest MiB arrives whole, on the node and in the job's output."""
    fleet = build_loop_fleet()
    log_path = tmp_path / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, "gpu-cap2", log,
                        options=["--no-wake", "--max-rank-output-mib", "1"])
    # each rank's own 10-byte lines ("rank 0 ab\n"), so a line in the wrong rank shows
    line = "rank $RANK ab"
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-cap2", state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, gpus=2, command=f"yes \"{line}\" | head -c 4000000; sleep 1; echo \"rank $RANK done\"",
                       submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, "the job to end")
        for rank in (0, 1):
            wait_for(lambda rank=rank: output(job, rank).endswith(f"rank {rank} done\n"), 60, f"rank {rank}'s end")
        generation = Allocation.objects.get(job=job).generation
        texts = {rank: output(job, rank) for rank in (0, 1)}
        workdir = state_dir / "gpu-cap2" / f"g{generation}"
    finally:
        stop_agent(agent)
        log.close()
    size = 4_000_000 + len("rank 0 done\n")
    for rank, text in texts.items():
        newest = f"rank {rank} ab\n" * (CAP // 10 - 2) + f"rank {rank} done\n"
        rank_file = workdir / f"rank{rank}.log"
        assert rank_file.stat().st_size == size
        with open(rank_file, "rb") as f:
            f.seek(size - CAP)
            assert b"\0" not in f.read(), f"rank {rank}'s newest cap's worth is whole on the node"
        gaps = dropped(text)
        assert gaps, f"rank {rank} printed past the cap faster than it ships: something was dropped"
        assert {r for _, r in gaps} == {rank}, f"rank {rank}'s output says another rank's bytes were dropped"
        assert sum(n for n, _ in gaps) <= 4_000_000 - CAP, "nothing within the cap is dropped"
        # every byte is received, stood for by a line saying it was dropped, or shown missing
        never = sum(int(n.replace(",", "")) for n in NEVER_RECEIVED.findall(text))
        assert received_bytes(text) + sum(min(n, RANK_BYTES) for n, _ in gaps) + never == size
        # and the lines say all that is missing but a gap too short for its line
        assert 0 <= size - received_bytes(text) - sum(n for n, _ in gaps) < SHORTER_THAN_ITS_LINE, \
            "the counts are all the rank printed"
        assert "\ufffd" not in text
        assert text.endswith(newest), f"rank {rank}'s newest cap's worth arrived whole"
        assert f"rank {1 - rank}" not in text, f"rank {rank}'s output holds the other rank's lines"
