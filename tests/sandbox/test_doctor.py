"""sandbox doctor fails closed: only a backend that contained every hostile program is safe."""

from __future__ import annotations

import json

import pytest

from verify_cli.cli.app import main
from verify_cli.sandbox.doctor import BackendDiagnosis, diagnose


def test_process_backend_is_never_reported_safe(tmp_path, capsys):
    out = tmp_path / "doctor.json"
    code = main(["sandbox", "doctor", "--backend", "process", "--json", str(out)])
    assert code == 1  # no backend proven safe
    doc = json.loads(out.read_text())
    (proc,) = doc["backends"]
    assert proc["backend"] == "process"
    assert proc["proven_safe"] is False
    escaped = {c["case"] for c in proc["cases"] if not c["contained"]}
    assert {"read_host_files", "network_egress", "write_outside"} <= escaped
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.bwrap
def test_bwrap_is_proven_safe_here():
    (diag,) = diagnose(["bwrap"], latency_runs=3)
    assert diag.proven_safe, [r.describe() for r in diag.results if not r.contained]
    assert diag.latency_p50_s is not None and diag.latency_p50_s < 2.0


def test_unavailable_or_unchecked_backend_is_not_safe():
    assert not BackendDiagnosis("x", available=False, isolation="").proven_safe
    assert not BackendDiagnosis("x", available=True, isolation="").proven_safe  # nothing ran
    assert not BackendDiagnosis("x", available=True, isolation="", error="boom").proven_safe


def test_unknown_backend_is_a_usage_error(capsys):
    assert main(["sandbox", "doctor", "--backend", "nope"]) == 2
    assert "unknown sandbox backend 'nope'" in capsys.readouterr().err


def test_create_sandbox_refuses_an_option_the_backend_does_not_take():
    from verify_cli.errors import UsageError
    from verify_cli.sandbox.registry import create_sandbox

    with pytest.raises(UsageError, match="sandbox backend 'process' has no option 'pool_size'"):
        create_sandbox("process", pool_size=4)  # process has no pool: never silently dropped
