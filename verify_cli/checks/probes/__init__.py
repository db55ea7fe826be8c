"""Reward-hack probes: adversarial candidates graded exactly like a real one (Phase.PROBE).

A probe that earns any score shows either weak tests (``ProbeTarget.TESTS``: a wrong answer
passes) or a hole in the grading harness (``ProbeTarget.HARNESS``: something that is not a test
result was taken as one). On a sound task with a sound harness, every probe scores 0.
"""

from __future__ import annotations

from verify_cli.checks.probes.git_probes import git_history_probe
from verify_cli.checks.probes.harbor_probes import HARBOR_PROBES
from verify_cli.checks.probes.js_probes import JS_PROBES
from verify_cli.checks.probes.model import Probe, ProbeContext, ProbeTarget
from verify_cli.checks.probes.python_probes import PYTHON_PROBES
from verify_cli.errors import UsageError
from verify_cli.grading.workspace import solution_as_candidate
from verify_cli.tasks.file_states import is_removed
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import matches_any

#: Each language's battery; repository tasks' .git-mining probe is in those of Python and JavaScript.
BATTERY: dict[str, tuple[Probe, ...]] = {"python": (*PYTHON_PROBES, git_history_probe("python")),
                                         "javascript": (*JS_PROBES, git_history_probe("javascript")),
                                         "shell": HARBOR_PROBES}


def probe_names(language: str | None = None) -> list[str]:
    """Names of the probes for ``language`` (every language when None)."""
    langs = [language] if language else list(BATTERY)
    return sorted({p.name for lang in langs for p in BATTERY.get(lang, ())})


def probes_for(language: str, only: set[str] | None = None) -> tuple[Probe, ...]:
    """The battery for ``language`` (empty for a language without one)."""
    if only is not None:
        unknown = only - set(probe_names())
        if unknown:
            raise UsageError(f"unknown probe(s): {', '.join(sorted(unknown))}",
                             hint=f"known probes: {', '.join(probe_names())}")
    return tuple(p for p in BATTERY.get(language, ()) if only is None or p.name in only)


def result_file_names(glob: str) -> tuple[str, ...]:
    """File names a forger would write for a results glob (``*`` and ``?`` filled in)."""
    base = glob.replace("**/", "")
    names = {base.replace("*", "junit").replace("?", "x")}
    if "*" in base:
        names.add(base.replace("*", "zz-forged").replace("?", "x"))
    return tuple(sorted(names))


def probe_context(task: Task, wall_seconds: float | None = None) -> ProbeContext:
    """What a probe knows of ``task``: the reference's editable text files and the results glob;
    ``wall_seconds``, the probe run's wall limit where tighter than the task's."""
    files: dict[str, str] = {}
    for rel, data in solution_as_candidate(task).items():
        if not matches_any(task.editable, rel) or is_removed(data):
            continue
        try:
            files[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ProbeContext(task=task, files=files, result_names=result_file_names(task.test.results),
                        wall_limit=wall_seconds)


def build_probe(probe: Probe, ctx: ProbeContext) -> dict[str, bytes] | None:
    """The probe's candidate files for the task, or None where it does not apply."""
    return probe.build(ctx)


__all__ = ["BATTERY", "Probe", "ProbeContext", "ProbeTarget", "build_probe", "probe_context",
           "probe_names", "probes_for", "result_file_names"]
