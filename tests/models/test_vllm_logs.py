"""vLLM's log in a file and the one line that says why its engine died (read from a real log of
the CPU build's crash: a seeded request prefilled in chunks), and the engine options that keep
seeded requests from being chunked on CPU. Pure: no vLLM needed."""

from __future__ import annotations

import json
import logging.config
from pathlib import Path

import pytest

from verify_cli.models.vllm_backend import vllm_engine_options
from verify_cli.models.vllm_logs import LOGGING_CONFIG_ENV, engine_cause, log_to_file, logging_config
from verify_cli.models.vllm_worker import WORKER_EXTENSION

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vllm" / "engine_dead.log"


def test_the_cause_is_the_workers_first_exception_not_the_engines_see_above() -> None:
    text = FIXTURE.read_text()
    assert "EngineDeadError" in text and text.count("Traceback") >= 3
    assert engine_cause(text) == "RuntimeError: CPU Generator does not use offset"


def test_no_traceback_no_cause_and_a_generic_one_when_that_is_all() -> None:
    assert engine_cause("INFO all fine\nWARNING something\n") is None
    generic = ("Traceback (most recent call last):\n  File 'x'\n"
               "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above)")
    assert engine_cause(generic) == "EngineDeadError: EngineCore encountered an issue. See stack trace (above)"


def test_log_to_file_points_vllm_logging_at_a_file_unless_the_user_chose(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOGGING_CONFIG_ENV, raising=False)
    monkeypatch.delenv("VLLM_CONFIGURE_LOGGING", raising=False)
    log = log_to_file(tmp_path)
    assert log is not None and log.parent == tmp_path
    config = json.loads(Path(__import__("os").environ[LOGGING_CONFIG_ENV]).read_text())
    assert config == logging_config(log)
    logging.config.dictConfig(config)  # a config logging takes as it is
    logging.getLogger("vllm.test").error("RuntimeError: boom")
    for handler in logging.getLogger("vllm").handlers:
        handler.flush()
    assert "RuntimeError: boom" in log.read_text()
    for handler in list(logging.getLogger("vllm").handlers):  # leave the test process's logging as it was
        logging.getLogger("vllm").removeHandler(handler)
        handler.close()
    monkeypatch.setenv(LOGGING_CONFIG_ENV, "/theirs.json")
    assert log_to_file(tmp_path) is None


def test_cpu_engines_never_chunk_prefills_gpu_engines_keep_vllms_defaults() -> None:
    common = {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.1, "dtype": "bfloat16"}
    cpu = vllm_engine_options(cpu=True, max_model_len=None, context_length=16384, **common)
    assert cpu["enable_chunked_prefill"] is False and cpu["max_num_batched_tokens"] == 16384
    assert cpu["enforce_eager"] is True
    assert vllm_engine_options(cpu=True, max_model_len=4096, context_length=16384, **common)[
        "max_num_batched_tokens"] == 4096
    gpu = vllm_engine_options(cpu=False, max_model_len=None, context_length=16384, **common)
    assert "enable_chunked_prefill" not in gpu and "max_num_batched_tokens" not in gpu and "enforce_eager" not in gpu
    # Both load pushed weights through the worker extension (vLLM's hook for RLHF weight updates).
    assert cpu["worker_extension_cls"] == gpu["worker_extension_cls"] == WORKER_EXTENSION


def test_tensors_pushed_to_the_workers_travel_as_bytes_and_come_back_equal() -> None:
    torch = pytest.importorskip("torch")
    from verify_cli.models.vllm_worker import pack_tensor, unpack_tensor

    for t in (torch.randn(3, 4), torch.randn(5).to(torch.bfloat16), torch.arange(6, dtype=torch.int64).reshape(2, 3)):
        packed = pack_tensor("w", t)
        assert isinstance(packed[3], bytes) and packed[1] in ("float32", "bfloat16", "int64")
        name, back = unpack_tensor(list(packed))  # the serializer gives lists for tuples
        assert name == "w" and back.dtype == t.dtype and torch.equal(back, t)
