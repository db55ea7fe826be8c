"""Host-side plumbing of one run that every backend shares (it runs in verify-cli's own process):

- ``trusted_launch``: the command lines and home folder of the trusted side's processes
  (``python -s -E harness/verify_launch.py MODULE``);
- ``job_send``: the one fd-passing job send to warm workers and session parents;
- ``cgroup``: a run's cgroup (memory, pids, CPU) and its OOM-kill count;
- ``killing``: ending a sandbox's processes; ``output``: bounded capture of stdout/stderr;
- ``captured``: the captured output's type; ``judging``: a finished run's exit to a verdict.
"""
