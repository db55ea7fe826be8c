from sensors import summarise

HEADER = "sensor_id,date,count,min,max,mean"


def run(tmp_path, body):
    src = tmp_path / "readings.csv"
    src.write_text("timestamp,sensor_id,value\n" + body, encoding="utf-8")
    out = tmp_path / "daily.csv"
    summarise(str(src), str(out))
    return out.read_text(encoding="utf-8").splitlines()


def test_basic_daily_statistics(tmp_path):
    lines = run(tmp_path, "2024-03-01T08:00:00Z,t1,20.5\n"
                          "2024-03-01T12:00:00Z,t1,22.5\n"
                          "2024-03-01T16:00:00Z,t1,18.0\n")
    assert lines == [HEADER, "t1,2024-03-01,3,18.00,22.50,20.33"]


def test_days_are_utc_calendar_days(tmp_path):
    lines = run(tmp_path, "2024-03-01T23:30:00-02:00,t1,5\n"
                          "2024-03-02T01:00:00+02:00,t1,7\n"
                          "2024-03-01T23:59:59Z,t1,1\n")
    assert lines == [HEADER, "t1,2024-03-01,2,1.00,7.00,4.00", "t1,2024-03-02,1,5.00,5.00,5.00"]


def test_gaps_are_dropped_not_zero(tmp_path):
    lines = run(tmp_path, "2024-03-01T01:00:00Z,t1,\n"
                          "2024-03-01T02:00:00Z,t1,4\n"
                          "2024-03-01T03:00:00Z,t1,n/a\n"
                          "2024-03-01T04:00:00Z,t1,nan\n"
                          "2024-03-01T05:00:00Z,t1,6\n"
                          "2024-03-02T05:00:00Z,t1,\n")
    assert lines == [HEADER, "t1,2024-03-01,2,4.00,6.00,5.00"]


def test_duplicate_instants_keep_last_reading(tmp_path):
    lines = run(tmp_path, "2024-03-01T10:00:00Z,t1,100\n"
                          "2024-03-01T12:00:00+02:00,t1,3\n"
                          "2024-03-01T11:00:00Z,t1,9\n"
                          "2024-03-01T11:00:00Z,t1,\n"
                          "2024-03-01T10:00:00Z,t2,8\n")
    assert lines == [HEADER, "t1,2024-03-01,1,3.00,3.00,3.00", "t2,2024-03-01,1,8.00,8.00,8.00"]


def test_sorted_by_sensor_then_date_and_ids_exact(tmp_path):
    lines = run(tmp_path, "2024-03-02T00:00:00Z,b,1\n"
                          "2024-03-01T00:00:00Z,b,2\n"
                          "2024-03-05T00:00:00Z,B,3\n"
                          "2024-02-28T00:00:00Z,a,-4\n")
    assert lines == [HEADER, "B,2024-03-05,1,3.00,3.00,3.00", "a,2024-02-28,1,-4.00,-4.00,-4.00",
                     "b,2024-03-01,1,2.00,2.00,2.00", "b,2024-03-02,1,1.00,1.00,1.00"]


def test_no_readings_gives_header_only(tmp_path):
    assert run(tmp_path, "") == [HEADER]
    assert run(tmp_path, "2024-03-01T00:00:00Z,t1,\n") == [HEADER]


def test_command_line(tmp_path):
    import os
    import shlex
    import subprocess
    import sys

    candidate_exec = shlex.split(os.environ.get("VERIFY_CANDIDATE_EXEC", ""))

    src = tmp_path / "in.csv"
    src.write_text("timestamp,sensor_id,value\n2024-01-01T00:00:00Z,s,1.005\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    p = subprocess.run([*candidate_exec, sys.executable, "sensors.py", str(src), str(out)], capture_output=True, timeout=20)
    assert p.returncode == 0
    assert out.read_text(encoding="utf-8") == HEADER + "\ns,2024-01-01,1,1.00,1.00,1.00\n"
