from pipeline import rollup

HEADER = "order_id,date,region,product,quantity,unit_price\n"
OUT_HEADER = "region,month,orders,units,revenue"


def run(tmp_path, body):
    src = tmp_path / "orders.csv"
    src.write_text(HEADER + body, encoding="utf-8")
    out = tmp_path / "rollup.csv"
    rollup(str(src), str(out))
    return out.read_text(encoding="utf-8").splitlines()


def test_every_data_row_is_counted(tmp_path):
    lines = run(tmp_path, "1,2024-01-05,north,widget,2,10.00\n"
                          "2,2024-01-20,north,widget,1,10.00\n")
    assert lines == [OUT_HEADER, "north,2024-01,2,3,30.00"]


def test_regions_are_trimmed_and_case_insensitive(tmp_path):
    lines = run(tmp_path, "1,2024-02-01, North ,a,1,1.00\n"
                          "2,2024-02-02,north,a,1,1.00\n"
                          "3,2024-02-03,NORTH,a,1,1.00\n"
                          "4,2024-02-04,north,a,1,1.00\n")
    assert lines == [OUT_HEADER, "north,2024-02,4,4,4.00"]


def test_revenue_is_exact_and_rounded_half_up(tmp_path):
    lines = run(tmp_path, "1,2024-03-01,x,a,1,0.10\n"
                          "2,2024-03-01,east,a,1,0.10\n"
                          "3,2024-03-02,east,a,1,0.10\n"
                          "4,2024-03-03,east,a,1,0.10\n"
                          "5,2024-03-04,west,a,1,0.125\n"
                          "6,2024-03-05,south,a,-1,0.125\n"
                          "7,2024-03-05,zed,a,3,2\n")
    assert lines == [OUT_HEADER, "east,2024-03,3,3,0.30", "south,2024-03,1,-1,-0.13",
                     "west,2024-03,1,1,0.13", "x,2024-03,1,1,0.10", "zed,2024-03,1,3,6.00"]


def test_invalid_rows_are_ignored(tmp_path):
    lines = run(tmp_path, "1,2024-04-01,south,a,,5.00\n"
                          "2,2024-04-01,south,a,n/a,5.00\n"
                          "3,2024-04-01,south,a,2.5,5.00\n"
                          "4,2024-04-01,south,a,1,\n"
                          "5,2024-04-01,south,a,1,free\n"
                          "6,2024-04-02,south,a,4,2.50\n")
    assert lines == [OUT_HEADER, "south,2024-04,1,4,10.00"]


def test_duplicate_order_ids_are_ignored_and_refunds_subtract(tmp_path):
    lines = run(tmp_path, "10,2024-05-01,west,a,5,3.00\n"
                          "11,2024-05-02,west,a,bad,3.00\n"
                          "11,2024-05-02,west,a,2,3.00\n"
                          "10,2024-05-03,west,a,5,3.00\n"
                          "12,2024-05-04,west,a,-1,3.00\n")
    assert lines == [OUT_HEADER, "west,2024-05,3,6,18.00"]


def test_output_sorted_by_region_then_month(tmp_path):
    lines = run(tmp_path, "1,2024-12-01,b,a,1,100.00\n"
                          "2,2024-02-01,b,a,1,1.00\n"
                          "3,2023-12-31,b,a,1,50.00\n"
                          "4,2024-01-01,a,a,1,2.00\n")
    assert lines == [OUT_HEADER, "a,2024-01,1,1,2.00", "b,2023-12,1,1,50.00",
                     "b,2024-02,1,1,1.00", "b,2024-12,1,1,100.00"]


def test_header_only_input_gives_header_only_output(tmp_path):
    assert run(tmp_path, "") == [OUT_HEADER]
    assert run(tmp_path, "1,2024-01-01,a,a,,1.00\n") == [OUT_HEADER]


def test_command_line(tmp_path):
    import os
    import shlex
    import subprocess
    import sys

    candidate_exec = shlex.split(os.environ.get("VERIFY_CANDIDATE_EXEC", ""))

    src = tmp_path / "in.csv"
    src.write_text(HEADER + "1,2024-06-01,east,a,2,1.25\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    p = subprocess.run([*candidate_exec, sys.executable, "pipeline.py", str(src), str(out)], capture_output=True, timeout=20)
    assert p.returncode == 0
    assert out.read_text(encoding="utf-8") == OUT_HEADER + "\neast,2024-06,1,2,2.50\n"
