"""Fakes of what JAX and PyTorch offer about device memory and torch.compile, for a
suite run by pytester: ``FAKE_DEVICES_CONFTEST`` puts fake ``jax`` and ``torch``
modules in ``sys.modules`` for the session (in process or in an xdist worker) and takes
them out at its end.  Tests allocate with the ``device`` fixture:
``device.allocate(bytes)`` (a peak, freed at once), ``device.keep(bytes)`` (kept in
use).  ``FAKE_GPU`` picks the framework: ``jax`` (the default), ``torch`` or ``cpu`` (JAX on
the CPU, whose ``memory_stats`` is None)."""

from __future__ import annotations

FAKE_DEVICES_CONFTEST = '''
import os
import sys
import types

import pytest


class Gpu:
    """One device's allocator: JAX's process-wide peak, torch's resettable one."""

    def __init__(self):
        self.in_use = 1_000
        self.peak = 1_000

    def allocate(self, count):
        self.peak = max(self.peak, self.in_use + count)

    def keep(self, count):
        self.in_use += count
        self.peak = max(self.peak, self.in_use)


GPU = Gpu()
KIND = os.environ.get("FAKE_GPU", "jax")
CALLS = {"reset": 0}


class JaxDevice:
    platform = "cpu" if KIND == "cpu" else "gpu"
    id = 0
    local_hardware_id = 0

    def memory_stats(self):
        if KIND == "cpu":
            return None
        return {"bytes_in_use": GPU.in_use, "peak_bytes_in_use": GPU.peak}


def fake_jax():
    jax = types.ModuleType("jax")
    jax.local_devices = lambda: [JaxDevice()]
    bridge = types.ModuleType("jax._src.xla_bridge")
    bridge.backends_are_initialized = lambda: True
    monitoring = types.ModuleType("jax.monitoring")
    monitoring.register_event_duration_secs_listener = lambda listener: None
    monitoring.register_event_listener = lambda listener: None
    jax.monitoring = monitoring
    return {"jax": jax, "jax._src.xla_bridge": bridge, "jax.monitoring": monitoring}


class Cuda:
    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def reset_peak_memory_stats(index):
        CALLS["reset"] += 1
        GPU.peak = GPU.in_use

    @staticmethod
    def max_memory_allocated(index):
        return GPU.peak


def fake_torch():
    torch = types.ModuleType("torch")
    torch.cuda = Cuda()
    return {"torch": torch}


class Device:
    allocate = staticmethod(GPU.allocate)
    keep = staticmethod(GPU.keep)
    calls = CALLS


FAKES = fake_torch() if KIND == "torch" else fake_jax()
SAVED = {name: sys.modules.get(name) for name in FAKES}
sys.modules.update(FAKES)


@pytest.fixture
def device():
    return Device


def pytest_unconfigure():
    for name, module in SAVED.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
'''

# A fake ``torch`` package, as files beside a suite run in a fresh process
# (``runpytest_subprocess``): imported for real, so the plugin sees ``torch._dynamo``
# arrive as it does torch's.  ``torch._dynamo.callback.compiled("0/1")`` is one
# compilation, as Dynamo reports it to its compile callbacks.
FAKE_TORCH_PACKAGE = {
    "torch/__init__.py": "",
    "torch/_dynamo/__init__.py": "from torch._dynamo import callback\n",
    "torch/_dynamo/callback.py": """
import types


class CompilationCallbackHandler:
    def __init__(self):
        self.start_callbacks, self.end_callbacks = [], []

    def register_start_callback(self, callback):
        self.start_callbacks.append(callback)

    def register_end_callback(self, callback):
        self.end_callbacks.append(callback)

    def remove_start_callback(self, callback):
        self.start_callbacks.remove(callback)

    def remove_end_callback(self, callback):
        self.end_callbacks.remove(callback)


callback_handler = CompilationCallbackHandler()


def compiled(compile_id, trigger="DYNAMO"):
    args = types.SimpleNamespace(
        compile_id=compile_id, callback_trigger=types.SimpleNamespace(name=trigger)
    )
    for callback in callback_handler.start_callbacks:
        callback(args)
    for callback in callback_handler.end_callbacks:
        callback(args)
""",
}
