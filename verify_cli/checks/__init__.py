"""Checks over task sets: solvability (check-tasks), flakiness and the audit (mutants, probes)."""

from typing import Any as _Any

from verify_cli._exports import lazy_attribute as _lazy_attribute

#: public name -> the module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    "CheckOptions": "verify_cli.checks.solvability",
    "check_tasks": "verify_cli.checks.solvability",
    "detection_power": "verify_cli.checks.solvability",
    "DEFAULT_REPEATS": "verify_cli.checks.solvability",
    "TaskVerdict": "verify_cli.checks.report",
    "AuditOptions": "verify_cli.checks.audit.model",
    "audit_tasks": "verify_cli.checks.audit.run",
    "MutationReport": "verify_cli.checks.audit",
    "default_cache_dir": "verify_cli.checks.cache",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> _Any:
    return _lazy_attribute(__name__, _PUBLIC, name)
