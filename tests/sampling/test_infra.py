"""The infra_error report: causes count together, the rate, the warning threshold."""

from __future__ import annotations

from verify_cli.sampling.infra import WARN_RATE, infra_cause, infra_report


def test_like_causes_count_together_and_ids_are_blanked() -> None:
    a = infra_cause(["no session could be opened: cannot start the session's container: 404 No such image a1b2c3"])
    b = infra_cause(["no session could be opened: cannot start the session's container: 500 daemon gone"])
    assert a == b == "no session could be opened: cannot start the session's container"
    assert infra_cause(["sandbox infra_error: worker 4711 died"]) == "sandbox infra_error: worker N died"
    assert infra_cause([]) == infra_cause(["", "  "]) == "unknown"


def test_the_rate_and_causes_over_samples() -> None:
    report = infra_report([(False, ()), (True, ["the model could not be asked: timeout"]), (False, ["x"]),
                           (True, ["the model could not be asked: timeout"])])
    assert report.samples == 4 and report.infra_errors == 2 and report.rate == 0.5 and report.alarming
    doc = report.to_dict()
    assert doc["causes"] == {"the model could not be asked: timeout": {"count": 2, "rate": 0.5}}
    assert "2 of 4 samples (50.0%)" in report.describe()
    quiet = infra_report([(False, ())] * 200 + [(True, ["x"])])
    assert quiet.rate <= WARN_RATE and not quiet.alarming
