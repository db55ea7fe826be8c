"""verify_cli.backend_config: options checked against a backend's frozen dataclass, once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from verify_cli.backend_config import BackendConfig, build_config, option_names
from verify_cli.errors import UsageError


@dataclass(frozen=True)
class WidgetConfig(BackendConfig):
    path: str | Path = field(metadata={"help": "where the widget lives"})
    size: int = 1
    ratio: float = 0.5
    loud: bool = False
    limit: int | None = None

    def check(self) -> str | None:
        return f"size must be >= 1, got {self.size}" if self.size < 1 else None


def build(**options: object) -> WidgetConfig:
    return build_config(WidgetConfig, options, owner="widget 'w'", labels={"size": "--size"})


def test_a_good_config_is_built_with_its_defaults() -> None:
    c = build(path=Path("/x"), ratio=2, limit=None)
    assert (c.path, c.size, c.ratio, c.loud, c.limit) == (Path("/x"), 1, 2, False, None)
    assert c.as_kwargs() == {"path": Path("/x"), "size": 1, "ratio": 2, "loud": False, "limit": None}
    assert option_names(WidgetConfig) == ["path", "size", "ratio", "loud", "limit"]


@pytest.mark.parametrize(("options", "message"), [
    ({}, "widget 'w' needs option 'path': where the widget lives"),
    ({"path": "p", "colour": "red"},
     "widget 'w' has no option 'colour' (its options: path, size, ratio, loud, limit)"),
    ({"path": "p", "size": "3"}, "widget 'w' option --size (size): '3' is not a whole number"),
    ({"path": "p", "size": True}, "widget 'w' option --size (size): True is not a whole number"),
    ({"path": "p", "loud": "yes"}, "widget 'w' option 'loud': 'yes' is not true or false"),
    ({"path": "p", "limit": 1.5}, "widget 'w' option 'limit': 1.5 is not a whole number or null"),
    ({"path": 3}, "widget 'w' option 'path': 3 is not a string or a path"),
    ({"path": "p", "size": 0}, "widget 'w': size must be >= 1, got 0"),
])
def test_a_bad_option_is_one_line_naming_it_and_the_backend(options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as e:
        build(**options)
    assert str(e.value) == message
