"""The kit every backend is checked with (it runs on the host, against a backend):

- ``conformance``: the hostile-program suite (:data:`~verify_cli.sandbox.kit.conformance.CASES`)
  and its host-side checks, used by ``verify-cli doctor`` and the tests;
- ``hostile``: the hostile programs themselves (run as candidates inside the sandbox);
- ``testing``: helpers for a backend's own tests.
"""
