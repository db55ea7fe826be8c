"""The service's request and response bodies: one pydantic model each, the source of /openapi.json.

``/v1/grade`` takes one or more candidates (a task by id or by path, and either files or a model's
completion); ``/run_code`` mirrors SandboxFusion's ``RunCodeRequest``/``RunCodeResponse``
(``sandbox/server/sandbox_api.py`` and ``sandbox/runners/types.py`` of bytedance/SandboxFusion),
field for field, so that verl's ``sandbox_fusion`` client reads the answers unchanged.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Candidate(BaseModel):
    """One thing to grade: a task (``task_id`` or ``task_path``) and the candidate's answer
    (``files``/``files_base64``, ``completion`` to extract the files from as ``difficulty``
    does, or ``patch``, a unified diff against the starter)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, max_length=200, description=(
        "The client's key for this candidate. A result already graded under this key is answered "
        "from the journal without grading again (retries are idempotent); the Python client sets "
        "one for every candidate."))
    task_id: str | None = Field(None, description="A task id of the served task sets.")
    task_path: str | None = Field(None, description="A task folder inside one of the served PATHs.")
    files: dict[str, str] | None = Field(None, description="Work-folder path -> UTF-8 content.")
    files_base64: dict[str, str] | None = Field(None, description="Work-folder path -> base64 content.")
    completion: str | None = Field(None, description=(
        "A model's reply: files are taken from its fenced code blocks (the answer format of the "
        "prompt verify-cli builds). No file found: status 'parse_error', score 0."))
    patch: str | None = Field(None, description=(
        "A unified diff against the task's starter (git diff output: a model's patch), applied as "
        "SWE-bench applies one (strict git apply, then with rejects, then patch with fuzz); its "
        "deletions and renames remove files, its mode changes apply. A diff that does not apply, or "
        "touches a test or a file outside the editable globs: status 'parse_error', score 0, the "
        "reason in problems."))
    seed: int | None = Field(None, description="Shuffle the test order and pin PYTHONHASHSEED.")
    label: str = Field("", max_length=200)

    @model_validator(mode="after")
    def _one_task_one_answer(self) -> Candidate:
        if (self.task_id is None) == (self.task_path is None):
            raise ValueError("give exactly one of task_id and task_path")
        answers = [self.files is not None or self.files_base64 is not None, self.completion is not None,
                   self.patch is not None]
        if sum(answers) != 1:
            raise ValueError("give one of files (files and/or files_base64), completion or patch")
        return self


class GradeBody(BaseModel):
    """A batch of candidates graded in parallel; results come back in completion order (each
    names its ``index``) when streamed, else in request order."""

    model_config = ConfigDict(extra="forbid")

    candidates: list[Candidate] = Field(..., min_length=1)
    deadline_seconds: float | None = Field(None, gt=0, description=(
        "Give up on what is not graded this many seconds after the request arrives: those "
        "candidates are answered 'infra_error' (retry them), never a score."))
    stream: bool = Field(False, description=(
        "Answer NDJSON, one result per line as each completes, then {\"end\": true, ...} "
        "(also chosen by 'Accept: application/x-ndjson')."))
    include_output: bool = Field(False, description="Add the test run's stdout/stderr to each result.")


class GradeStatusOut(StrEnum):
    GRADED = "graded"
    INFRA_ERROR = "infra_error"
    PARSE_ERROR = "parse_error"


class TestOut(BaseModel):
    __test__ = False

    id: str
    outcome: str
    duration: float
    message: str = ""


class Timings(BaseModel):
    queue_seconds: float = Field(description="Waiting for a worker.")
    grade_seconds: float = Field(description="Laying out, running and judging.")
    total_seconds: float


class RunOut(BaseModel):
    verdict: str
    exit_code: int | None = None
    wall_seconds: float = 0.0
    stdout: str | None = None
    stderr: str | None = None


class GradeOut(BaseModel):
    """One candidate's result. ``score`` is None exactly when ``status`` is ``infra_error``."""

    index: int
    id: str | None = None
    task_id: str
    status: GradeStatusOut
    score: float | None
    passed: bool
    tests: list[TestOut] = []
    problems: list[str] = []
    ignored_files: list[str] = []
    isolation: str = ""
    seed: int | None = None
    label: str = ""
    timings: Timings
    run: RunOut | None = None
    #: True when this answer came from the journal (graded before, under the same id).
    replayed: bool = False


class GradeResponse(BaseModel):
    results: list[GradeOut]


class StreamEnd(BaseModel):
    end: Literal[True] = True
    count: int


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable name: unknown_task, invalid_field, body_too_large, ...")
    message: str
    field: str | None = Field(None, description="JSON pointer of the offending field (or /headers/...).")
    hint: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: Literal["ok", "draining"]
    tasks: int
    task_load_failures: int
    backend: str
    executor: str
    workers: int
    queue_capacity: int
    queued: int
    running: int
    sessions_open: int = 0
    max_sessions: int = 0
    run_code_held: int = Field(0, description="/run_code requests waiting for a free worker.")
    run_code_languages: list[str] = Field([], description="The languages /run_code can run on this service.")
    loop_block_ms_max: float = Field(0.0, description="The event loop's longest stall since the start (ms).")
    loop_block_ms_recent: float = Field(0.0, description="The event loop's longest stall in the last 10 s (ms).")


# --- agent sessions -----------------------------------------------------------------------------

class SessionOpen(BaseModel):
    """Open an agent session over a task's starter files and visible tests."""

    model_config = ConfigDict(extra="forbid")

    task_id: str | None = Field(None, description="A task id of the served task sets.")
    task_path: str | None = Field(None, description="A task folder inside one of the served PATHs.")

    @model_validator(mode="after")
    def _one_task(self) -> SessionOpen:
        if (self.task_id is None) == (self.task_path is None):
            raise ValueError("give exactly one of task_id and task_path")
        return self


class SessionInfo(BaseModel):
    session_id: str
    task_id: str
    editable: list[str] = Field(description="Globs of the files submit grades.")
    workdir: str = Field(description="The work folder as commands see it.")
    idle_seconds: float = Field(description="The session is reclaimed after this long without a call.")
    files: list[str] = Field(description="The files the session starts with.")


class ExecBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(..., min_length=1, max_length=1_000_000, description="A bash command line.")
    timeout: float | None = Field(None, gt=0, description="Seconds (default: the task's wall limit).")


class ExecOut(BaseModel):
    verdict: str = Field(description="ok, nonzero_exit, timeout, memory_limit, output_limit, signal, "
                         "session_dead (the command killed its session) or infra_error (never the agent's).")
    exit_code: int | None = None
    signal: int | None = None
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_seconds: float
    message: str = ""


class ReadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(..., min_length=1, description="Relative to the work folder.")


class ReadOut(BaseModel):
    path: str
    content: str = Field(description="The file as UTF-8 (undecodable bytes replaced).")
    bytes: int


class WriteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(..., min_length=1, description="Relative to the work folder; folders are made.")
    content: str


class WriteOut(BaseModel):
    path: str
    bytes: int


class RunTestsOut(BaseModel):
    """The visible tests against the session's editable files, by the trusted grader."""

    status: GradeStatusOut
    score: float | None
    passed: int
    failed: int
    tests: list[TestOut] = []
    problems: list[str] = []
    #: Why the candidate's code did not load (its exception and line), where the tests could not.
    why: str = ""
    #: Editable files left out of the grade, each with why (a name that is not valid UTF-8).
    left_out: list[str] = []


class Reward(BaseModel):
    """The episode's reward: the trusted grade of the editable files by the task's full tests.
    ``status`` is passed, failed or infra_error (``score`` null: retry or mask, never 0)."""

    session_id: str
    task_id: str
    status: Literal["passed", "failed", "infra_error"]
    score: float | None
    reason: str = ""
    tests: list[TestOut] = []
    problems: list[str] = []
    #: True when this submit was answered from the first one's reward (a retry).
    replayed: bool = False


class SessionClosed(BaseModel):
    session_id: str
    closed: bool


# --- SandboxFusion /run_code ------------------------------------------------------------------

SandboxFusionLanguage = Literal[
    "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript", "sql",
    "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest", "junit",
    "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket"]


class RunCodeRequest(BaseModel):
    """SandboxFusion's RunCodeRequest (the same fields, defaults and meanings)."""

    compile_timeout: float = Field(10, description="compile timeout for compiled languages")
    run_timeout: float = Field(10, description="code run timeout")
    memory_limit_MB: int = Field(-1, description="maximum memory allowed in megabytes")
    code: str = Field(..., examples=['print("hello")'], description="the code to run")
    stdin: str | None = Field(None, examples=[""], description="optional string to pass into stdin")
    language: SandboxFusionLanguage = Field(..., examples=["python"],
                                            description="the language or execution mode to run the code")
    files: dict[str, str | None] = Field({}, description="a dict from file path to base64 encoded file content")
    fetch_files: list[str] = Field([], description="a list of file paths to fetch after code execution")


class CommandRunStatus(StrEnum):
    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunStatus(StrEnum):
    Success = "Success"
    Failed = "Failed"
    SandboxError = "SandboxError"


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = {}
