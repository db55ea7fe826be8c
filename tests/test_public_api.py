"""The public API: every name a library user may import is in ``verify_cli.__all__`` and imports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import verify_cli
from verify_cli.sandbox import Sandbox, registry

REQUIRED = {
    "Grader", "GradeRequest", "GradeResult", "load_task", "load_task_set", "Task", "create_sandbox",
    "register_sandbox", "Sandbox", "RunSpec", "RunResult", "Verdict", "VerifyError",
    "create_model_backend", "create_executor", "check_tasks", "audit_tasks", "__version__",
}


def test_required_public_names_are_in_all() -> None:
    assert set(verify_cli.__all__) >= REQUIRED, REQUIRED - set(verify_cli.__all__)


@pytest.mark.parametrize("name", verify_cli.__all__)
def test_every_public_name_imports(name: str) -> None:
    assert getattr(verify_cli, name) is not None


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError):
        _ = verify_cli.not_a_public_name  # type: ignore[attr-defined]


PLUGIN = '''
from verify_cli import RunResult, RunSpec, Sandbox


class PluggedSandbox(Sandbox):
    """A third-party backend found through the entry-point group."""

    def run(self, spec: RunSpec) -> RunResult:
        raise NotImplementedError
'''


def test_third_party_backends_plug_in_through_entry_points(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugged_backend.py").write_text(PLUGIN)
    dist = tmp_path / "plugged_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[verify_cli.sandboxes]\nplugged = plugged_backend:PluggedSandbox\n"
        "broken = plugged_backend:DoesNotExist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh = registry.new_registry()  # the built-ins, and plugins looked up again
    for name, cls in registry.SANDBOXES.items():
        fresh.add(name, cls)
    monkeypatch.setattr(registry, "SANDBOXES", fresh)
    try:
        cls = registry.sandbox_class("plugged")
        assert issubclass(cls, Sandbox) and cls.name == "plugged"
        assert "plugged" in registry.sandbox_names()
        from verify_cli.errors import SandboxUnavailableError

        with pytest.raises(SandboxUnavailableError, match="could not be loaded"):
            registry.sandbox_class("broken")
    finally:
        sys.modules.pop("plugged_backend", None)
