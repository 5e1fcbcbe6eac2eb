"""What every layer shares: items and records, the taxonomy, text rules, errors, paths, atomic
writes, JSONL and JSON-array reading, intervals, prompt loading and heap trimming. Imports nothing
else of rmb_build."""
