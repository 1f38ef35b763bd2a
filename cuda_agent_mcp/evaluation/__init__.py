"""The caller side of evaluation, in the tool process: what the judge is asked and answers (`job.py`), the
pool of judge servers (`judge_service.py`), the static audit, rewards and intervals, the verdict rules'
version (`rules_version.py`). Never imports torch, the judge or the worker; the judge imports `job` (and
through it `rules_version`), `ops`, `kernel_names` and `datasheets` from here."""
