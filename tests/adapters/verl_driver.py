"""Runs the real verl (0.9.1) on verify-cli's adapters, in a child process (framework_extras.run_child).

``verl_driver.py REQUEST.json OUT.json``. What it does, all with verl's own code:

- the trainer's config composed by hydra from verl's ``ppo_trainer.yaml``, with the overrides a
  user gives (``reward.custom_reward_function.path=.../verify_cli/adapters/verl.py`` and so on);
- the rows of ``verify-cli export --format verl`` read by verl's ``RLHFDataset``; the batch a
  rollout hands the trainer built as verl's agent loop builds it (prompt left-padded, response
  right-padded, one ``DataProto``);
- ``reward``: verl's ``RewardLoopManager`` (the trainer's reward path: Ray actors running
  ``RewardLoopWorker`` with the registered ``naive`` reward manager) scores the batch; the
  scores come back through ``extract_reward`` as the trainer reads them;
- ``infra``: the same batch through a ``RewardLoopWorker`` whose reward function grades through a
  service that cannot meet the deadline: what verl raises is reported;
- ``tool``: verl's ``initialize_tools_from_config`` builds the tools from ``tool_config()``'s file,
  the model's turns are parsed by verl's hermes tool parser and run by ``ToolAgentLoop._call_tool``
  (create, execute with ``agent_data``, release around every call), as verl's multi-turn loop does;
- ``trajectories``: whole trajectories through ``_call_tool``, then scored as verl's agent loop
  scores them (``tool_extra_fields``, the ``naive`` manager, ``compute_score``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def compose(request: dict[str, Any], *overrides: str) -> Any:
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    import verify_cli.adapters.verl as adapter

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=[
            f"actor_rollout_ref.model.path={request['model']}",
            f"reward.custom_reward_function.path={adapter.__file__}",
            "reward.custom_reward_function.name=compute_score",
            "reward.num_workers=1", f"data.max_prompt_length={request['prompt_length']}",
            f"data.max_response_length={request['response_length']}", *overrides])


def build_batch(request: dict[str, Any], config: Any) -> tuple[Any, list[bool]]:
    """The rollout's output for ``request['completions']`` ([task id, text] pairs), as a DataProto."""
    import torch
    from omegaconf import OmegaConf
    from tensordict import TensorDict
    from verl import DataProto
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
    from verl.utils.model import compute_position_id_with_mask

    tokenizer = hf_tokenizer(request["model"])
    data_config = OmegaConf.create(OmegaConf.to_container(config.data, resolve=True))
    data_config.update({"cache_dir": request["cache"], "filter_overlong_prompts_workers": 1})
    dataset = RLHFDataset(request["parquet"], tokenizer, data_config)
    rows = {dataset[i]["extra_info"]["task_id"]: dataset[i] for i in range(len(dataset))}

    def pad(ids: list[int], length: int, side: str) -> tuple[Any, Any]:
        tokenizer.padding_side = side
        out = tokenizer.pad({"input_ids": ids}, padding="max_length", max_length=length, return_tensors="pt",
                            return_attention_mask=True)
        return out["input_ids"].reshape(1, -1), out["attention_mask"].reshape(1, -1)

    prompts, prompt_masks, responses, response_masks, chosen, roundtrip = [], [], [], [], [], []
    for task_id, text in request["completions"]:
        row = rows[task_id]
        prompt_ids = list(tokenizer.apply_chat_template(row["raw_prompt"], add_generation_prompt=True,
                                                        tokenize=True, return_dict=False))
        response_ids = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        assert len(prompt_ids) <= request["prompt_length"] and len(response_ids) <= request["response_length"]
        roundtrip.append(tokenizer.decode(response_ids, skip_special_tokens=True) == text)
        for (ids, mask), into in ((pad(prompt_ids, request["prompt_length"], "left"), (prompts, prompt_masks)),
                                  (pad(response_ids, request["response_length"], "right"),
                                   (responses, response_masks))):
            into[0].append(ids)
            into[1].append(mask)
        chosen.append(dict(row))
    attention = torch.cat([torch.cat(prompt_masks), torch.cat(response_masks)], dim=1)
    batch = TensorDict({"prompts": torch.cat(prompts), "responses": torch.cat(responses),
                        "input_ids": torch.cat([torch.cat(prompts), torch.cat(responses)], dim=1),
                        "attention_mask": attention, "response_mask": torch.cat(response_masks),
                        "position_ids": compute_position_id_with_mask(attention)}, batch_size=len(chosen))
    columns = {k: v for k, v in collate_fn(chosen).items() if not isinstance(v, torch.Tensor)}
    return DataProto(batch=batch, non_tensor_batch=columns), roundtrip


def reward(request: dict[str, Any]) -> dict[str, Any]:
    import ray
    from verl.experimental.reward_loop import RewardLoopManager
    from verl.trainer.ppo.reward import extract_reward

    config = compose(request, f"+reward.custom_reward_function.reward_kwargs.tasks={request['tasks']}",
                     "+reward.custom_reward_function.reward_kwargs.sandbox=bwrap")
    data, roundtrip = build_batch(request, config)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        manager = RewardLoopManager(config)
        scored = manager.compute_rm_score(data)
    finally:
        ray.shutdown()
    tensor, extra = extract_reward(scored)
    prompt_length = data.batch["prompts"].shape[1]
    last = data.batch["attention_mask"][:, prompt_length:].sum(dim=1) - 1
    return {"scores": [float(tensor[i, last[i]]) for i in range(len(data))],
            "elsewhere": float(tensor.abs().sum() - tensor[range(len(data)), last].abs().sum()),
            "status": [str(s) for s in extra["status"]], "passed": [bool(p) for p in extra["passed"]],
            "decoded_exactly": roundtrip}


def infra(request: dict[str, Any]) -> dict[str, Any]:
    from verl.experimental.reward_loop import RewardLoopWorker

    from verify_cli.adapters.grading import RewardInfraError

    config = compose(request, f"+reward.custom_reward_function.reward_kwargs.url={request['url']}",
                     "+reward.custom_reward_function.reward_kwargs.deadline_seconds=0.001",
                     "+reward.custom_reward_function.reward_kwargs.infra_retries=0")
    data, _ = build_batch(request, config)
    worker = RewardLoopWorker(config)
    try:
        outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    except Exception as e:  # what verl's trainer sees
        return {"raised": type(e).__name__, "is_reward_infra_error": isinstance(e, RewardInfraError),
                "message": str(e)}
    return {"raised": None, "outputs": [o["reward_score"] for o in outputs]}


def tool(request: dict[str, Any]) -> dict[str, Any]:
    import yaml
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils import hf_tokenizer

    from verify_cli.adapters.verl_tool import tool_config, tools_kwargs

    path = Path(request["cache"]) / "tools.yaml"
    path.write_text(yaml.safe_dump(tool_config(request["url"])))
    tools = {t.name: t for t in initialize_tools_from_config(str(path))}
    tokenizer = hf_tokenizer(request["model"])
    parser = ToolParser.get_tool_parser("hermes", tokenizer)

    class Loop:
        """What ToolAgentLoop._call_tool reads of its loop (ToolAgentLoop.__init__ sets these from
        the rollout config and the tool list); the rest of the loop needs a model server."""

        def __init__(self) -> None:
            self.tools = tools
            self.max_tool_response_length = request["max_tool_response_length"]
            self.tool_response_truncate_side = "middle"

    loop = Loop()
    kwargs = tools_kwargs(request["task_id"])
    data = AgentData(messages=[], image_data=[], video_data=[], audio_data=None, mm_processor_kwargs=None,
                     metrics={}, request_id="trajectory-1", tools_kwargs=kwargs)

    async def episode() -> list[dict[str, Any]]:
        steps = []
        for name, args in request["calls"]:
            # the model's turn, as tokens, parsed by verl's hermes parser into its FunctionCall
            turn = f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
            _, (call,) = await parser.extract_tool_calls(tokenizer.encode(turn, add_special_tokens=False))
            response, step_reward, metrics = await ToolAgentLoop._call_tool(loop, call, kwargs, data)
            assert isinstance(response, ToolResponse)
            steps.append({"tool": name, "text": response.text, "reward": step_reward, "metrics": metrics})
        return steps

    return {"base_tool": all(isinstance(t, BaseTool) for t in tools.values()), "names": sorted(tools),
            "steps": asyncio.run(episode())}


def trajectories(request: dict[str, Any]) -> dict[str, Any]:
    """Whole trajectories: each one's tool calls run by ``ToolAgentLoop._call_tool`` on its own
    ``AgentData`` (request id), then its output scored as verl's agent loop scores it
    (``AgentLoopWorker._compute_score``: the decoded response, the row's extra_info with the
    tools' kwargs, ``tool_extra_fields`` = the loop's ``extra_fields`` with turn_scores and
    tool_rewards) by a ``RewardLoopWorker`` running the ``naive`` manager and compute_score."""
    import numpy as np
    import yaml
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils import hf_tokenizer

    from verify_cli.adapters.verl_tool import tool_config, tools_kwargs

    path = Path(request["cache"]) / "tools.yaml"
    path.write_text(yaml.safe_dump(tool_config(request["url"])))
    tools = {t.name: t for t in initialize_tools_from_config(str(path))}
    tokenizer = hf_tokenizer(request["model"])
    parser = ToolParser.get_tool_parser("hermes", tokenizer)

    class Loop:
        def __init__(self) -> None:
            self.tools = tools
            self.max_tool_response_length = 4000
            self.tool_response_truncate_side = "middle"

    loop = Loop()
    fields = []
    texts = []

    async def run_all() -> None:
        for i, trajectory in enumerate(request["trajectories"]):
            kwargs = tools_kwargs(trajectory["task_id"])
            data = AgentData(messages=[], image_data=[], video_data=[], audio_data=None, mm_processor_kwargs=None,
                             metrics={}, request_id=f"whole-trajectory-{i}", tools_kwargs=kwargs)
            response = []  # the trajectory's response: its turns and the tools' answers, as decoded
            for name, args in trajectory["calls"]:
                turn = f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
                _, (call,) = await parser.extract_tool_calls(tokenizer.encode(turn, add_special_tokens=False))
                answer, tool_reward, _ = await ToolAgentLoop._call_tool(loop, call, kwargs, data)
                response += [turn, f"<tool_response>\n{answer.text}\n</tool_response>"]
                if tool_reward is not None:
                    data.tool_rewards.append(tool_reward)
            texts.append("\n".join([*response, trajectory["text"]]))
            extra = dict(data.extra_fields)  # as ToolAgentLoop.run finalises its output
            extra.update({"turn_scores": data.turn_scores, "tool_rewards": data.tool_rewards})
            fields.append(extra)

    asyncio.run(run_all())
    config = compose(request, f"+reward.custom_reward_function.reward_kwargs.url={request['url']}")
    batch, _ = build_batch({**request, "completions": [[t["task_id"], text]
                                                       for t, text in zip(request["trajectories"], texts,
                                                                          strict=True)]}, config)
    for info, trajectory in zip(batch.non_tensor_batch["extra_info"], request["trajectories"], strict=True):
        info["tools_kwargs"] = tools_kwargs(trajectory["task_id"])  # as the agent export's rows hold them
    batch.non_tensor_batch["tool_extra_fields"] = np.array(fields, dtype=object)
    batch.non_tensor_batch["__num_turns__"] = np.array([len(t["calls"]) + 1 for t in request["trajectories"]])
    worker = RewardLoopWorker(config)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(batch))
    return {"scores": [o["reward_score"] for o in outputs],
            "status": [o["reward_extra_info"]["status"] for o in outputs],
            "recorded": [[v.get("reward") for k, v in f.items() if k.startswith("verify_cli_session/")]
                         for f in fields]}


def main() -> int:
    request = json.loads(Path(sys.argv[1]).read_text())
    out: dict[str, Any] = {}
    import verl

    out["verl_version"] = verl.__version__
    for mode in request["modes"]:
        started = time.monotonic()
        try:
            out[mode] = {"reward": reward, "infra": infra, "tool": tool, "trajectories": trajectories}[mode](request)
        except Exception:
            out[mode] = {"error": traceback.format_exc()}
        out[mode]["seconds"] = round(time.monotonic() - started, 1)
    Path(sys.argv[2]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
