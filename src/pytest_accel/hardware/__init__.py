"""Which accelerator a run has, and which tests can run on it: detection (built-in
probes and third-party detectors), the JAX probe, the markers and selection."""

# Here, not in ``detection``: the command's parser shows it, and only ``detect`` detects.
PROBE_TIMEOUT = 120.0  # seconds the JAX probe may take by default
