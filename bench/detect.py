"""Latency of detection without the JAX probe: this machine, and a fake 8-chip TPU host.

python bench/detect.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from pytest_accel.hardware.builtin import detect_builtin
from pytest_accel.hardware.detection import DetectionContext, cpu_detection


def measure(root: Path, rounds: int = 200) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        context = DetectionContext(root, dict(os.environ))
        detect_builtin(context) or cpu_detection(context)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def fake_tpu_host(root: Path, chips: int = 8) -> Path:
    for index in range(chips):
        device = root / f"sys/bus/pci/devices/0000:00:{index:02x}.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text("0x1ae0\n")
        (device / "device").write_text("0x006f\n")
        (root / "dev").mkdir(exist_ok=True)
        (root / f"dev/accel{index}").write_text("")
    for index in range(100):  # the rest of a real host's PCI tree
        device = root / f"sys/bus/pci/devices/0000:01:{index:02x}.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text("0x8086\n")
        (device / "device").write_text("0x1234\n")
    return root


def main() -> None:
    print("| machine | median detection (ms) |\n| --- | ---: |")
    print(f"| this machine (/) | {measure(Path('/')):.2f} |")
    with tempfile.TemporaryDirectory() as tmp:
        latency = measure(fake_tpu_host(Path(tmp)))
        print(f"| fake TPU v6e host, 8 chips + 100 PCI devices | {latency:.2f} |")


if __name__ == "__main__":
    main()
