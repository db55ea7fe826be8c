"""``verify-cli audit``: mutation checks, flakiness reruns, reward-hack probes, labelled solutions."""

from verify_cli.checks.audit.model import (
    AuditOptions,
    AuditVerdict,
    FlakinessReport,
    LabelledReport,
    MutantResult,
    MutantStatus,
    MutationReport,
    ProbeResult,
    TaskAudit,
    TestFlips,
)
from verify_cli.checks.audit.run import AuditProgress, audit_tasks

__all__ = ["AuditOptions", "AuditProgress", "AuditVerdict", "FlakinessReport", "LabelledReport",
           "MutantResult", "MutantStatus", "MutationReport", "ProbeResult", "TaskAudit", "TestFlips",
           "audit_tasks"]
