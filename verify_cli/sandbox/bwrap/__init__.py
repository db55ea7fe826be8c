"""The ``bwrap`` backend (bubblewrap on the host), by what each module holds:

- ``sandbox``: :class:`~verify_cli.sandbox.bwrap.sandbox.BwrapSandbox`, the registered backend:
  one bwrap sandbox per cold run, the argv of the tests' and the candidate's sandboxes;
- ``warm``: the warm pool (keys, starts, lends and evicts workers);
- ``worker``: one warm worker from the host's side (``harness/warm/warm_worker.py`` inside its
  sandbox) and its run protocol;
- ``candidate``: warm candidate parents for two-process runs (``harness/candidate/
  verify_candidate_parent.py`` inside theirs).
"""
