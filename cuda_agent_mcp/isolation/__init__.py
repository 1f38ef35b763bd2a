"""Isolation primitives: what confines a process, kept apart from the executors built on them.

Namespaces (`namespaces.py`), the filesystem views (`view.py` with its entry `view_main.py`, and
`judge_view.py`: standalone scripts run as `python -I -S FILE`, standard library only; `bubblewrap.py`),
Landlock (`landlock.py`, also standard library only), pids cgroups (`cgroup.py`), uids (`uids.py`,
`judge_user.py`), a process's identity and compile caches (`identity.py`), quotas (`quota.py`) and
containers (`containers.py`, `worker_containers.py`). The untrusted worker imports `landlock` alone of
these. This package imports nothing of the project but `errors`.
"""
