import json

from orders_etl import run_pipeline

CSV = """order_id,customer,placed_at,amount,currency,status
1,acme,2024-03-01T23:30:00-02:00,10.00,USD,paid
2,acme,2024-03-02T09:00:00+00:00,5.00,EUR,paid
3,bolt,2024-03-02T10:00:00+00:00,7.00,EUR,cancelled
4,bolt,2024-03-02T10:00:00,7.00,EUR,paid
"""


def project(tmp_path, config_text):
    (tmp_path / "orders.csv").write_text(CSV, encoding="utf-8")
    config = tmp_path / "etl.toml"
    config.write_text(config_text, encoding="utf-8")
    return config


def test_pipeline_by_customer_with_full_sections(tmp_path):
    config = project(tmp_path, '[aggregate]\nby = "customer"\ntimezone_offset_hours = 0\n'
                               '[output]\npath = "out/summary.json"\nindent = 2\n')
    summary = run_pipeline(config, tmp_path)
    assert summary["groups"] == {"acme": {"orders": "2", "total": "14.00"}}
    assert summary["rejected"] == ["4"]
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary


def test_pipeline_with_a_partial_output_section(tmp_path):
    config = project(tmp_path, "[output]\nindent = 0\n")
    summary = run_pipeline(config, tmp_path)
    assert summary["groups"] == {"2024-03-02": {"orders": "2", "total": "14.00"}}
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
