"""What a run and a baseline are, in memory: the session's timing table, a run's
timings, a baseline's samples and summary, findings, and the column encodings."""
