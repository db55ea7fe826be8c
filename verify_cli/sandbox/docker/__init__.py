"""The ``docker`` backend, by what each module holds:

- ``sandbox``: :class:`DockerSandbox`, the registered backend; its single-use mode (one container
  per run, optionally pre-started) and warm pytest containers;
- ``nodes``: the default ``node`` mode: long-lived containers, each run isolated inside one by
  bubblewrap; ``node_pool``: the elastic pools of such containers;
- ``containers``: what a container is made of (shape, limits, tmpfs, labels);
- ``execs``, ``streams``: exec/attach plumbing, sockets and Docker's frames;
- ``scripts``: the shell programs of single-use containers; ``archives``: tar in and out;
- ``reaper``: removing containers (ours in the background, orphans by label);
- ``verdicts``, ``errors``: judging a run; Docker's failures mapped to verdicts once;
- ``pool``: the pool of prepared single-use containers; ``seccomp``: the node mode's profile.
"""

from __future__ import annotations

from verify_cli.sandbox.docker.reaper import reap_containers
from verify_cli.sandbox.docker.sandbox import DockerSandbox

__all__ = ["DockerSandbox", "reap_containers"]
