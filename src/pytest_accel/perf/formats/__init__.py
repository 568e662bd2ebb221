"""The timing feature's files: the record, the baseline and merged records, each
read, checked and written by one module."""
