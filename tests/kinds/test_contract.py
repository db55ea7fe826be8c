"""The contract every registered task kind must pass, on bwrap, cold and warm.

For each name in the kinds registry, ``tests/fixtures/kinds/<kind>/`` holds a tiny task
(``task/``), a wrong solution (``mutant/``, files overlaid on the reference) and the hack
batteries to grade (``contract.toml``). The suite proves, for every kind:

- the reference is sound: it passes, with full score, under two seeds;
- the starter fails;
- the mutant fails;
- every candidate of the hack batteries earns 0 (graded, never an infrastructure error);
- cold and warm grading give the same verdicts and scores (warm where the kind runs warm: the
  warm grader's counters say which runs went warm);
- a kind that has a two-process runtime is graded two-process.

A kind whose tasks run only in an image (``Kind.needs_image``: harbor) is graded on bwrap over the
image's exported root file system (Docker builds and exports it: such a kind's cases are marked
docker); tests/formats/harbor/test_harbor_docker.py grades it on docker.

A kind registered without a fixture fails here, with a message saying to add one.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from verify_cli.grading.grader import Grader, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.kinds import KINDS
from verify_cli.kinds.base import Kind
from verify_cli.sandbox.base import Sandbox, WarmStats
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kinds"
KIND_NAMES = KINDS.names()
MODES = ("cold", "warm")
SEEDS = (1, 2)

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


@dataclass(frozen=True)
class Fixture:
    task: Task
    mutant: dict[str, bytes]
    hacks: dict[str, bytes]  # name -> the candidate's first editable file


def load_fixture(kind: str) -> Fixture:
    folder = FIXTURES / kind
    if not (folder / "task" / "task.toml").is_file() or not (folder / "contract.toml").is_file():
        pytest.fail(f"task kind {kind!r} is registered but has no contract fixture: add "
                    f"tests/fixtures/kinds/{kind}/ with task/ (a tiny task of the kind), mutant/ "
                    "(a wrong solution's files) and contract.toml (its hack batteries); see "
                    "docs/task-kinds.md")
    task = load_task(folder / "task")
    assert task.kind == kind, f"the {kind} fixture's task.toml says kind = {task.kind!r}"
    mutant = {p.relative_to(folder / "mutant").as_posix(): p.read_bytes()
              for p in sorted((folder / "mutant").rglob("*")) if p.is_file()}
    assert mutant, f"tests/fixtures/kinds/{kind}/mutant/ is empty"
    spec = tomllib.loads((folder / "contract.toml").read_text(encoding="utf-8"))
    hacks: dict[str, bytes] = {}
    for battery in spec.get("battery", []):
        where = (folder / battery["dir"]).resolve()
        head = (where / battery["head"]).read_bytes() if battery.get("head") else b""
        tail = (where / battery["tail"]).read_bytes() if battery.get("tail") else b""
        for p in sorted(where.glob(battery.get("glob", "*"))):
            if p.is_file() and not p.name.startswith("_"):
                hacks[f"{where.name}/{p.stem}"] = head + p.read_bytes() + tail
    assert hacks, f"tests/fixtures/kinds/{kind}/contract.toml names no hack candidate"
    return Fixture(task, mutant, hacks)


@dataclass(frozen=True)
class Graded:
    fixture: Fixture
    results: dict[str, GradeResult]  # label -> result
    stats: WarmStats | None


def requests(fx: Fixture) -> list[GradeRequest]:
    task = fx.task
    out = [GradeRequest(task, Phase.REFERENCE, seed=seed, label=f"reference/{seed}") for seed in SEEDS]
    out.append(GradeRequest(task, Phase.STARTER, label="starter"))
    out.append(GradeRequest(task, Phase.MUTANT, candidate=fx.mutant, label="mutant"))
    out += [GradeRequest(task, Phase.PROBE, candidate={task.editable[0]: code}, label=f"hack/{name}")
            for name, code in fx.hacks.items()]
    return out


@pytest.fixture(scope="module")
def bwrap() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as box:
        yield box


@pytest.fixture(scope="module")
def boxes(bwrap: Sandbox) -> Iterator[dict[str, Sandbox]]:
    """The backend each kind is graded on: bwrap (over an image's exported root for kinds that
    need one); another made on first use where bwrap could not grade a kind."""
    made: dict[str, Sandbox] = {"bwrap": bwrap}
    yield made
    if "docker" in made:
        made["docker"].close()


def box_for(kind: str, boxes: dict[str, Sandbox]) -> Sandbox:
    name = "docker" if KINDS.get(kind).needs_image and not boxes["bwrap"].runs_over_root else "bwrap"
    if name not in boxes:
        boxes[name] = create_sandbox(name)
        boxes[name].start()
    return boxes[name]


_GRADED: dict[tuple[str, str], Graded] = {}


def offers_warm(kind: str) -> bool:
    """Whether the kind offers warm jobs (pytest and the built-in runners do)."""
    return type(KINDS.get(kind)).warm_invocation is not Kind.warm_invocation


#: What a warm grader grades of a kind that offers no warm jobs: its warm host declines every run,
#: so each runs the cold path the cold grader's full battery already proves; these show that it
#: declines (no warm run, no warm candidate) and that the verdicts are the cold ones.
ROUTING_LABELS = ("reference/1", "starter", "mutant")


def grade_fixture(box: Sandbox, kind: str, mode: str) -> Graded:
    """The kind's fixture graded in ``mode`` (once per session: every clause reads the same runs)."""
    key = (kind, mode)
    if key not in _GRADED:
        fx = load_fixture(kind)
        wanted = requests(fx)
        if mode == "warm" and not offers_warm(kind):
            wanted = [r for r in wanted if r.label in ROUTING_LABELS or r.label == f"hack/{next(iter(fx.hacks))}"]
        with Grader(box, warm=mode == "warm") as grader:
            results = {r.label: r for r in grader.grade_many(wanted, jobs=2)}
            _GRADED[key] = Graded(fx, results, grader.warm_stats)
    return _GRADED[key]


@pytest.fixture
def graded(request: pytest.FixtureRequest, boxes: dict[str, Sandbox]) -> Graded:
    kind, mode = request.param
    return grade_fixture(box_for(kind, boxes), kind, mode)


def _marks(kind: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.docker] if KINDS.get(kind).needs_image else []


#: Every kind cold; warm where the kind offers warm jobs (for the others, test_warm_and_cold_agree).
CASES = [pytest.param((k, m), id=f"{k}-{m}", marks=_marks(k))
         for k in KIND_NAMES for m in MODES if m == "cold" or offers_warm(k)]


def test_every_registered_kind_has_a_fixture() -> None:
    missing = [k for k in KIND_NAMES if not (FIXTURES / k / "contract.toml").is_file()]
    assert missing == [], (f"task kinds without a contract fixture: {missing}: add "
                           "tests/fixtures/kinds/<kind>/ (docs/task-kinds.md)")


@pytest.mark.parametrize("graded", CASES, indirect=True)
def test_the_reference_is_sound(graded: Graded) -> None:
    for seed in SEEDS:
        r = graded.results[f"reference/{seed}"]
        assert r.status is GradeStatus.GRADED and r.passed and r.score == 1.0, r.to_dict(with_run=False)
        kind = KINDS.get(graded.fixture.task.kind)
        runtime = kind.two_process_runtime(graded.fixture.task)
        if kind.runs_itself(graded.fixture.task):  # its own isolation (harbor: the isolated verifier)
            assert r.isolation not in ("two-process", "in-process"), r.isolation
        else:
            assert r.isolation == ("two-process" if runtime is not None else "in-process"), r.isolation_notes


@pytest.mark.parametrize("graded", CASES, indirect=True)
def test_the_starter_fails(graded: Graded) -> None:
    r = graded.results["starter"]
    assert r.status is GradeStatus.GRADED and not r.passed and r.score == 0.0, r.to_dict(with_run=False)


@pytest.mark.parametrize("graded", CASES, indirect=True)
def test_the_mutant_fails(graded: Graded) -> None:
    r = graded.results["mutant"]
    assert r.status is GradeStatus.GRADED and not r.passed, r.to_dict(with_run=False)


@pytest.mark.parametrize("graded", CASES, indirect=True)
def test_the_hack_battery_earns_nothing(graded: Graded) -> None:
    won = {label: (r.status.value, r.score, r.problems[:2]) for label, r in graded.results.items()
           if label.startswith("hack/") and (r.status is not GradeStatus.GRADED or r.score != 0.0 or r.passed)}
    assert won == {}
    assert sum(1 for label in graded.results if label.startswith("hack/")) == len(graded.fixture.hacks)


@pytest.mark.parametrize("kind", [pytest.param(k, marks=_marks(k)) for k in KIND_NAMES])
def test_warm_and_cold_agree(kind: str, boxes: dict[str, Sandbox]) -> None:
    box = box_for(kind, boxes)
    verdicts = {mode: {label: (r.status, r.passed, r.score)
                       for label, r in grade_fixture(box, kind, mode).results.items()}
                for mode in MODES}
    assert verdicts["warm"] == {label: verdicts["cold"][label] for label in verdicts["warm"]}
    # Runs went warm exactly where the kind offers warm jobs (pytest and the built-in runners);
    # where it offers none, every run (candidate side too) went cold: the cold battery's path.
    stats = grade_fixture(box, kind, "warm").stats
    assert stats is not None and (stats.warm_runs > 0) == offers_warm(kind), (kind, stats)
    if offers_warm(kind):
        assert verdicts["warm"].keys() == verdicts["cold"].keys()
    else:
        assert stats.warm_candidates == 0 and len(verdicts["warm"]) == len(ROUTING_LABELS) + 1, (kind, stats)


def test_a_kind_without_a_fixture_fails_saying_what_to_add() -> None:
    with pytest.raises(pytest.fail.Exception) as e:
        load_fixture("a-kind-with-no-fixture")
    assert "tests/fixtures/kinds/a-kind-with-no-fixture/" in str(e.value) and "add" in str(e.value)
