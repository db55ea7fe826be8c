"""Speed levers of the warm runs that a benchmark can switch off, one at a time.

Each lever changes how fast a run is, never what it is allowed to do or what it scores: with a
lever off, the run takes the path it took before the lever was built. ``VERIFY_LEVERS_OFF``
(comma-separated names, or ``all``) switches levers off in this process, so that
``scripts/bench_peers.py --lever-off NAME`` measures a lever against the same code without it,
in the same run. Nothing else should set it.
"""

from __future__ import annotations

import os

LEVERS_OFF_ENV = "VERIFY_LEVERS_OFF"

#: The levers, by name: what each one does.
LEVERS: dict[str, str] = {
    "candidate-spare": "the warm candidate parent forks the next run's candidate (its namespaces "
                       "entered, its server forked) once a run is over, off the next run's path",
    "docker-warm-runner": "docker's warm nodes also run the built-in runners (calls, stdio tasks) "
                          "forked from a node that imported the runner, instead of cold",
    "docker-warm-candidate": "docker's warm nodes fork each two-process run's Python candidate server "
                             "from a candidate parent started once per node, instead of a cold start",
    "docker-unpack-here": "docker's warm node runs unpack the work folder in their own process, as GNU "
                          "tar lays it out, where the archive holds only plain files and folders, "
                          "instead of spawning tar",
    "docker-host-threads": "the docker host keeps a run's deadlines on one shared thread and sends a "
                           "warm job's small work folder from the run's own thread, instead of "
                           "starting three or four threads a run",
}


def lever_on(name: str) -> bool:
    """Whether the lever ``name`` is on (the default) in this process."""
    if name not in LEVERS:
        raise KeyError(f"no speed lever {name!r} (known: {', '.join(sorted(LEVERS))})")
    off = {part.strip() for part in os.environ.get(LEVERS_OFF_ENV, "").split(",") if part.strip()}
    return name not in off and "all" not in off


__all__ = ["LEVERS", "LEVERS_OFF_ENV", "lever_on"]
