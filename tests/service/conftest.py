"""A real ``verify-cli serve`` in a subprocess on a loopback port, over the real bwrap sandbox."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT, SAMPLE_TASKS
from verify_cli.tasks import load_task

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'verify-cli[serve]'")

TOKEN = "s3cret-test-token"
SLOW_SECONDS = 1.0


@dataclass
class Served:
    """A running service: its process, URL and the lines it logged."""

    proc: subprocess.Popen[str]
    url: str
    port: int
    args: list[str]
    stderr_lines: list[str] = field(default_factory=list)

    def headers(self, token: str | None = TOKEN) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def metric(self, name: str, token: str | None = TOKEN) -> float:
        """The value of a metric line (name with labels) in /metrics, 0 when absent."""
        text = httpx.get(f"{self.url}/metrics", headers=self.headers(token)).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return 0.0


def start_server(paths: list[Path], *options: str, port: int = 0, journal: Path | None = None,
                 env: dict[str, str] | None = None, default_journal: bool = False) -> Served:
    """Start ``verify-cli serve`` and wait until it listens (its URL is on stdout).
    ``default_journal``: name no journal option (the default journal under $XDG_STATE_HOME)."""
    args = [sys.executable, "-m", "verify_cli", "serve", *map(str, paths), "--port", str(port),
            "--sandbox", "bwrap", *options]
    if not default_journal:
        args += ["--journal", str(journal)] if journal else ["--no-journal"]
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            cwd=REPO_ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []

    def drain_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    threading.Thread(target=drain_stderr, daemon=True).start()
    deadline = time.monotonic() + 90
    url = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "listening on " in line:
            url = line.rsplit("listening on ", 1)[1].strip()
            break
    if not url:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the service did not start: {''.join(lines)[-3000:]}")
    threading.Thread(target=lambda: proc.stdout.read() if proc.stdout else None, daemon=True).start()
    return Served(proc, url, int(url.rsplit(":", 1)[1]), args, lines)


def make_slow_task(root: Path, task_id: str = "test/slow-merge", seconds: float = SLOW_SECONDS) -> Path:
    """A copy of coding/interval-merge whose tests also sleep ``seconds``."""
    dest = root / task_id.replace("/", "-")
    shutil.copytree(SAMPLE_TASKS / "coding-interval-merge", dest)
    toml = dest / "task.toml"
    toml.write_text(toml.read_text().replace('id = "coding/interval-merge"', f'id = "{task_id}"'))
    (dest / "tests" / "test_slow.py").write_text(f"import time\n\n\ndef test_slow():\n    time.sleep({seconds})\n")
    return dest


def reference_files(task_dir: Path) -> dict[str, str]:
    """The reference's files (solution/, or what a repository task's solution.patch writes)."""
    return {rel: p.read_text() for rel, p in sorted(load_task(task_dir).solution_files().items())}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """sample_tasks plus a slow task, behind a token, with a 1 MB body limit and a journal."""
    extra = tmp_path_factory.mktemp("slow")
    make_slow_task(extra)
    journal = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    s = start_server([SAMPLE_TASKS, extra], "--jobs", "2", "--max-body-mb", "1", "--token-file", str(token_file),
                     journal=journal)
    yield s
    s.stop()
