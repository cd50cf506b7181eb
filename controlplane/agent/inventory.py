"""What the node has: NVML where GPUs exist (nvidia-ml-py), the operator's declaration otherwise.

NVML also gives device activity: the fraction of time a kernel ran on the GPU over the last
sample period (`nvmlDeviceGetUtilizationRates().gpu`). That is *device activity*, one factor of
utilization, never "utilization" itself (DEVELOPERS.md): the control plane multiplies it with
allocation and with the job's own progress.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import Any

_MODEL = re.compile(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b")
_MEMORY = re.compile(r"(\d{2,3})\s*GB", re.IGNORECASE)


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    uuid: str
    memory_mb: int

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid, "memory_mb": self.memory_mb}


def gpu_type_name(device_name: str, memory_mb: int) -> str:
    """'NVIDIA H100 80GB HBM3' → 'H100-80GB'; 'NVIDIA A100-SXM4-40GB' → 'A100-40GB'.

    The control plane knows GPU types by such names; `--gpu-type` overrides the guess."""
    cleaned = device_name.replace("NVIDIA", " ").replace("-", " ")
    model = _MODEL.search(cleaned)
    memory = _MEMORY.search(device_name)
    gb = int(memory.group(1)) if memory else round(memory_mb / 1024)
    return f"{model.group(1) if model else cleaned.strip().split()[0]}-{gb}GB"


class Nvml:
    """NVML, if this machine has NVIDIA GPUs and the driver; `Nvml.open()` is None otherwise."""

    def __init__(self, module: Any) -> None:
        self.nvml = module
        self.handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(module.nvmlDeviceGetCount())]

    @classmethod
    def open(cls) -> Nvml | None:
        try:
            import pynvml

            pynvml.nvmlInit()
            nvml = cls(pynvml)
        except Exception:  # noqa: BLE001 - no library, no driver or no device: declared inventory
            return None
        return nvml if nvml.handles else None

    def devices(self) -> list[Device]:
        out = []
        for index, handle in enumerate(self.handles):
            name = self.nvml.nvmlDeviceGetName(handle)
            uuid = self.nvml.nvmlDeviceGetUUID(handle)
            memory = self.nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            out.append(Device(index, name.decode() if isinstance(name, bytes) else str(name),
                              uuid.decode() if isinstance(uuid, bytes) else str(uuid), int(memory)))
        return out

    def activity(self, gpus: tuple[int, ...]) -> float | None:
        values = []
        for gpu in gpus:
            if 0 <= gpu < len(self.handles):
                try:
                    values.append(self.nvml.nvmlDeviceGetUtilizationRates(self.handles[gpu]).gpu / 100.0)
                except Exception:  # noqa: BLE001 - a device error is no reading, not a crash
                    continue
        return sum(values) / len(values) if values else None


def host_cpus() -> int:
    return os.cpu_count() or 1


def host_memory_gb() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // (1024 * 1024)
    except OSError:
        pass
    return 0


def host_identity() -> str:
    """Which host this agent runs on, as its registration says it: the host name and the
    machine id (systemd's /etc/machine-id, else D-Bus's), so two hosts given one node name are
    told apart by the control plane (agent_protocol._refuse_another_host), and a restart on the
    same host is not."""
    machine = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as f:
                machine = f.read(64).strip()
        except OSError:
            continue
        if machine:
            break
    return f"{socket.gethostname()}/{machine}"[:200] if machine else socket.gethostname()[:200]
