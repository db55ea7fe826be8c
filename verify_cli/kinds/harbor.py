"""The ``harbor`` kind: a Harbor task folder read as it is (:mod:`verify_cli.formats.harbor`).

Its phases run themselves, on docker or on bwrap (over the image's exported root file system:
:mod:`verify_cli.formats.harbor.bwrap`), as Harbor trials: the reference is the oracle
(``solution/solve.sh``) run in the environment, the starter is doing nothing, a candidate is the
agent's files laid into the working directory; the verifier (``tests/test.sh``) then runs in a
fresh container with only that work carried in (or, declared, in the agent's own: shared). The
reward file becomes one test per reward key; the score is the mean of the keys' rewards.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from verify_cli.formats.harbor.bwrap import BwrapTrials
from verify_cli.formats.harbor.dockerfile import baked_in
from verify_cli.formats.harbor.spec import AGENT_SCRIPT, VerifierMode
from verify_cli.formats.harbor.verifier import REWARD_RESULT, AgentPhase, HarborTrials
from verify_cli.grading.junit import TestOutcome
from verify_cli.grading.workspace import Phase
from verify_cli.kinds.base import Kind, OwnRun
from verify_cli.kinds.registry import register_kind
from verify_cli.sandbox.base import RunResult, RuntimeLayer, Sandbox, Verdict
from verify_cli.sandbox.sessions.base import Session, SessionLimits
from verify_cli.tasks.model import Task

#: The isolation a Harbor grade reports, by verifier mode.
ISOLATED_VERIFIER = "isolated-verifier"
SHARED_VERIFIER = "shared-verifier"
SHARED_NOTE = ("the verifier ran in the agent's own container (shared mode): what the agent left on PATH, in "
               "/tests, in site-packages or running in the background ran with it")
IN_VERIFIER_NOTE = ("test.sh runs the agent's files in the verifier's container: code of the agent's that the "
                    "tests execute runs beside the verifier")


class HarborKind(Kind):
    name: ClassVar[str] = "harbor"
    summary: ClassVar[str] = ("a Harbor task folder: the oracle or the agent's work, then tests/test.sh in a fresh "
                              "container (or root) writing /logs/verifier/reward.json|txt")
    needs_image: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.trials = HarborTrials()
        self.bwrap_trials = BwrapTrials()

    def runs_itself(self, task: Task) -> bool:
        return True

    def run_phase(self, task: Task, phase: Phase, candidate: Mapping[str, bytes] | None, *, sandbox: Sandbox,
                  image: str | None, layer: RuntimeLayer | None = None) -> OwnRun:
        if task.harbor is None:
            return OwnRun(RunResult(Verdict.SETUP_ERROR, sandbox.name, message=(
                f"{task.id}: kind 'harbor' is for Harbor task folders (instruction.md, tests/test.sh, "
                "solution/solve.sh), read as they are")))
        root = layer.root if layer is not None else None
        if not sandbox.runs_in_image and not sandbox.runs_over_root:
            return OwnRun(RunResult(Verdict.SETUP_ERROR, sandbox.name, message=(
                f"a Harbor task runs in its environment's image: grade {task.id} with --sandbox docker, or "
                "--sandbox bwrap (over the image's exported root file system)")))
        if not sandbox.runs_in_image and root is None:
            return OwnRun(RunResult(Verdict.SETUP_ERROR, sandbox.name, message=(
                f"{task.id} names a prebuilt image ([environment] docker_image) and no environment/Dockerfile: "
                f"{sandbox.name} runs over the root file systems of images verify-cli builds; grade it with "
                "--sandbox docker, or add an environment/Dockerfile (FROM that image)")))
        files = dict(candidate or {})
        script = files.pop(AGENT_SCRIPT, None)
        agent = {Phase.REFERENCE: AgentPhase(oracle=True), Phase.STARTER: AgentPhase()}.get(
            phase, AgentPhase(script=script.decode("utf-8", "replace") if script is not None else None, files=files))
        if sandbox.runs_in_image:
            trial = self.trials.trial(task, image or task.environment.image, agent)
        else:
            assert root is not None
            trial = self.bwrap_trials.trial(task, root, agent)
        shared = trial.mode is VerifierMode.SHARED
        return OwnRun(trial.run, trial.ignored, SHARED_VERIFIER if shared else ISOLATED_VERIFIER,
                      ((SHARED_NOTE,) if shared else (IN_VERIFIER_NOTE,)) + trial.notes)

    def open_session(self, task: Task, image: str | None, limits: SessionLimits, *,
                     layer: RuntimeLayer | None = None) -> Session | None:
        from verify_cli.formats.harbor.session import HarborSession

        if task.harbor is None:
            return None
        if layer is not None and layer.root is not None:  # bwrap: a writable root over the image's exported one
            from verify_cli.formats.harbor.bwrap_session import HarborBwrapSession

            return HarborBwrapSession.open(task, layer.root, limits, self.bwrap_trials)
        return HarborSession.open(task, image or task.environment.image, limits, self.trials)

    def score(self, task: Task, tests: list[TestOutcome], run: RunResult) -> float | None:
        raw = run.results.get(REWARD_RESULT)
        if raw is None:
            return 0.0
        try:
            return float(json.loads(raw)["score"])
        except (ValueError, KeyError, TypeError):
            return 0.0

    def outcomes(self, task: Task, tests: list[TestOutcome]) -> list[TestOutcome]:
        return tests  # reward keys, not test files

    def findings(self, task: Task) -> list[tuple[str, str, bool]]:
        spec = task.harbor
        out: list[tuple[str, str, bool]] = []
        if spec is None:
            return out
        if spec.dockerfile:
            leaks = baked_in(task.root / spec.dockerfile, task.root)
            if leaks:
                out.append(("image-leaks", "; ".join(leak.describe(spec.dockerfile) for leak in leaks), True))
        if spec.mode is VerifierMode.SHARED:
            out.append(("verifier", "declared shared ([verify_cli] verifier): test.sh runs in the agent's container, "
                        "where whatever the agent left runs with it (weaker than the isolated verifier)", False))
        if spec.unsupported:
            out.append(("harbor-fields", "; ".join(f"{k}: {v}" for k, v in sorted(spec.unsupported.items())), False))
        return out


register_kind(HarborKind())
