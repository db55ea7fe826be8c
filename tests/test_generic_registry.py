"""The one registry by name (verify_cli.registry): built-ins listed before import, duplicates
refused, plugins found through a real entry-point group, a broken plugin confined to its name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.registry import DuplicateNameError, Registry


def _module(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(body)


def _dist(tmp_path: Path, group: str, entries: dict[str, str]) -> None:
    info = tmp_path / "verify_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: verify-plugin-demo\nVersion: 1.0\n")
    lines = [f"[{group}]"] + [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("vreg_")]:
        del sys.modules[name]


def test_builtins_are_listed_before_import_and_loaded_on_first_use(on_path: Path) -> None:
    _module(on_path, "vreg_home", "from verify_cli.registry import Registry\n"
            "REG = Registry('widget', builtin={'alpha': 'vreg_alpha'})\n")
    _module(on_path, "vreg_alpha", "from vreg_home import REG\nclass A: pass\nREG.add('alpha', A)\n")
    from vreg_home import REG  # type: ignore[import-not-found]

    assert REG.names() == ["alpha"]
    assert "vreg_alpha" not in sys.modules
    assert REG.get("alpha").__name__ == "A"


def test_unknown_name_is_a_usage_error_listing_the_choices() -> None:
    reg: Registry[int] = Registry("widget")
    reg.add("one", 1)
    reg.add("two", 2)
    with pytest.raises(UsageError) as e:
        reg.get("three")
    assert "unknown widget 'three'" in str(e.value)
    assert "one, two" in str(e.value)


def test_a_second_object_under_one_name_is_refused() -> None:
    reg: Registry[object] = Registry("widget")
    a = object()
    reg.add("x", a)
    reg.add("x", a)  # the same object again: harmless (a module imported twice)
    with pytest.raises(DuplicateNameError):
        reg.add("x", object())


def test_plugins_come_from_the_entry_point_group_and_never_replace_a_builtin(on_path: Path) -> None:
    _module(on_path, "vreg_plug", "class Good: pass\nclass Builtin: pass\n")
    _module(on_path, "vreg_broken", "raise RuntimeError('boom at import')\n")
    _dist(on_path, "verify_cli.test_widgets", {
        "good": "vreg_plug:Good", "core": "vreg_plug:Builtin", "broken": "vreg_broken:Thing",
        "refused": "vreg_plug"})
    core = type("Core", (), {})
    reg: Registry[object] = Registry("widget", entry_point_group="verify_cli.test_widgets",
                                     accept=lambda o: None if isinstance(o, type) else "not a class")
    reg.add("core", core)
    assert reg.get("good").__name__ == "Good"  # type: ignore[attr-defined]
    assert reg.get("core") is core
    with pytest.raises(UsageError, match="boom at import"):
        reg.get("broken")
    with pytest.raises(UsageError, match="not a class"):
        reg.get("refused")
    assert {"good", "core"} <= set(reg.names())
