"""The caller side of evaluation, in the tool process: what the judge is asked and answers (`job.py`), the
pool of judge servers (`judge_service.py`), the static audit, rewards and intervals. Never imports torch,
the judge or the worker; the judge imports `job`, `ops`, `kernel_names` and `datasheets` from here."""
