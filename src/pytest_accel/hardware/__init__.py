"""Which accelerator a run has, and which tests can run on it: detection (built-in
probes and third-party detectors), the JAX probe, the markers and selection."""
