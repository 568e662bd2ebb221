"""What a run and a baseline are, in memory: the session's timing table, a run's
timings, a baseline's samples and summary, findings, and the column encodings."""

# Here, not in ``samples`` and ``timings``: every run that loads the plugin reads the
# options' defaults and choices, and only one that records or compares needs those
# modules (their dataclasses take milliseconds to create).
DEFAULT_WINDOW = 20  # runs kept per hardware key in a baseline (--perf-window)
TIMES = ("execution", "wall")  # what a timing is judged on (``Rule.time``, --perf-time)
