"""The agent's NVML path, driven by a stand-in for the `pynvml` module (this machine has no GPU).

The stand-in answers the handful of calls the agent makes with the types nvidia-ml-py 12
returns (names and UUIDs as `str`, memory in bytes, utilization in percent) and raises
`NVMLError` like the real library for a device that cannot be read. What is checked is our
side: the inventory the agent registers, and the device activity it reports for a job's GPUs
(never called "utilization" on its own). It is not a substitute for a run on real GPUs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.client import AgentClient
from controlplane.agent.inventory import Nvml
from controlplane.agent.main import real_inventory
from controlplane.agent.members import Assignment, ProcessLauncher
from controlplane.agent.node import NodeAgent
from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node, UsageSample
from controlplane.services import cycle
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job

GIB = 1024**3


class NVMLError(Exception):
    pass


@dataclass
class _Memory:
    total: int


@dataclass
class _Rates:
    gpu: int
    memory: int


class StandInNvml:
    """The subset of `pynvml` the agent calls; `busy[i]` is device i's kernel-time percent,
    None for a device whose counters cannot be read."""

    def __init__(self, name: str, memory_bytes: int, busy: list[int | None]) -> None:
        self.name, self.memory_bytes, self.busy = name, memory_bytes, busy

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - pynvml's names
        return len(self.busy)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        if not 0 <= index < len(self.busy):
            raise NVMLError("NVML_ERROR_INVALID_ARGUMENT")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return self.name

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return f"GPU-0000000{handle}-aaaa-bbbb-cccc-dddddddddddd"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:  # noqa: N802
        return _Memory(total=self.memory_bytes)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Rates:  # noqa: N802
        busy = self.busy[handle]
        if busy is None:
            raise NVMLError("NVML_ERROR_GPU_IS_LOST")
        return _Rates(gpu=busy, memory=busy // 2)


def h100_node(busy: list[int | None] | None = None) -> Nvml:
    return Nvml(StandInNvml("NVIDIA H100 80GB HBM3", 80 * GIB, busy or [90, 70, 50, 30, 0, 0, 0, 0]))


def agent_args(**overrides: Any) -> argparse.Namespace:
    fields: dict[str, Any] = {"name": "gpu-nvml", "gpus": 0, "gpu_type": None, "pool": None, "cpus": 16,
                              "memory_gb": 256, "leaf_switch": "leaf-1", "spine": "spine-1", "capacity_tier": None}
    fields.update(overrides)
    return argparse.Namespace(**fields)


def test_the_inventory_comes_from_nvml_devices_not_the_declaration() -> None:
    inventory = real_inventory(agent_args(gpus=2), h100_node())

    assert (inventory.gpu_count, inventory.gpu_type, inventory.pool) == (8, "H100-80GB", "h100")
    assert [d["index"] for d in inventory.devices] == list(range(8))
    assert {d["memory_mb"] for d in inventory.devices} == {80 * 1024}
    assert len({d["uuid"] for d in inventory.devices}) == 8
    assert inventory.simulated is False


def test_an_operator_declared_gpu_type_overrides_the_name_nvml_gives() -> None:
    assert real_inventory(agent_args(gpu_type="H100-SXM"), h100_node()).gpu_type == "H100-SXM"


def test_without_nvml_and_without_a_declaration_the_agent_refuses_to_start() -> None:
    with pytest.raises(SystemExit, match="--gpus"):
        real_inventory(agent_args(gpus=0), None)


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ((0, 1), 0.8),  # the mean of the job's own devices: 90 % and 70 %
        ((2,), 0.5),
        ((4, 5), 0.0),  # idle devices read 0, which is a reading, not a missing one
        ((3, 7), 0.15),
    ],
    ids=["two-busy-devices", "one-device", "idle-devices", "busy-and-idle"],
)
def test_device_activity_is_the_mean_over_the_jobs_own_gpus(gpus: tuple[int, ...], expected: float) -> None:
    assert h100_node().activity(gpus) == pytest.approx(expected)


def test_a_device_that_cannot_be_read_is_left_out_not_a_crash() -> None:
    nvml = h100_node([80, None, 40, 0, 0, 0, 0, 0])

    assert nvml.activity((0, 1, 2)) == pytest.approx(0.6)
    assert nvml.activity((1,)) is None
    assert nvml.activity((8, 9)) is None  # not this node's devices


def test_nvml_activity_wins_over_what_the_job_writes(tmp_path: Path) -> None:
    assignment = Assignment(
        generation=3, state="active", job_id=1, job_name="j", command="sleep 5", env={}, gpus=(0, 1), ranks=(0, 1),
        world_size=2, nnodes=1, node_rank=0, master_addr="gpu-nvml", master_port=20003, checkpoint_interval_s=None,
        runtime_limit_s=60, release=None,
    )
    member = ProcessLauncher(tmp_path, "gpu-nvml", devices=h100_node()).launch(assignment)
    try:
        assert member.activity() == pytest.approx(0.8)
    finally:
        member.kill()


@pytest.mark.django_db(transaction=True)
def test_an_nvml_node_registers_its_devices_and_reports_their_activity_for_its_job(
    live_server: Any, tmp_path: Path
) -> None:
    fleet = build_loop_fleet()
    nvml = h100_node([60, 60, 60, 60, 60, 60, 60, 60])
    agent = NodeAgent(real_inventory(agent_args(), nvml), client=AgentClient(live_server.url),
                      launcher=ProcessLauncher(tmp_path, "gpu-nvml", devices=nvml), bootstrap_token=BOOTSTRAP,
                      interval_s=0.2, sample_interval_s=0.2)
    _drive(agent, lambda: Node.objects.filter(name="gpu-nvml", state=NodeState.READY).exists())
    node = Node.objects.get(name="gpu-nvml")
    registered = Event.objects.get(node=node, kind=EventKind.NODE_REGISTERED)
    assert (node.gpu_count, node.gpu_type.name) == (8, "H100-80GB")
    assert [d["name"] for d in registered.data["devices"]] == ["NVIDIA H100 80GB HBM3"] * 8

    job = make_job(fleet, gpus=2, command="sleep 1")
    cycle.run_cycle("test")
    _drive(agent, lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED)

    samples = UsageSample.objects.filter(allocation=Allocation.objects.get(job=job))
    assert samples.exists() and {s.gpu_activity for s in samples} == {0.6}


def _drive(agent: NodeAgent, until: Any, timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agent.step()
        if until():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")
