"""Judging a run against its baseline: the single-run rule, changes over runs,
runner speed, one cause one alarm, layouts and compilation, and the comparison
that puts them together (``comparison.compare``, the one entry point)."""
