"""verl tools backed by ``verify-cli serve`` sessions, for verl's multi-turn agent loop.

One class, :class:`VerifyCliTool`, serves the five agent tools (``bash``, ``read_file``,
``write_file``, ``run_tests``, ``submit``); which one an instance is comes from its
``tool_schema``'s function name, as verl builds tools from a tool config file
(:func:`tool_config` writes one)::

    tools:
      - class_name: verify_cli.adapters.verl_tool.VerifyCliTool
        config: {type: native, url: "http://127.0.0.1:8000"}     # or $VERIFY_SERVE_URL
        tool_schema: {type: function, function: {name: bash, ...}}

Each dataset row names its task in ``extra_info.tools_kwargs`` (:func:`tools_kwargs`). The methods
have verl's ``BaseTool`` signatures (``verl/tools/base_tool.py``): ``create(instance_id=None,
**kwargs) -> (instance_id, ToolResponse)`` (the task id in ``create_kwargs``),
``execute(instance_id, parameters, **kwargs) -> (ToolResponse, step reward, metrics)``,
``calc_reward(instance_id, **kwargs) -> float``, ``release(instance_id, **kwargs)``.

The five tools of one trajectory share one session. verl's ``ToolAgentLoop`` creates and
releases an instance around every call and passes ``agent_data``: the session is keyed by
``agent_data.request_id`` then and outlives the instances (it ends with ``submit``, with
:meth:`VerifyCliTool.end_trajectory`, or when the service reclaims it idle). A loop that creates
one instance per trajectory (create, many executes, calc_reward, release) keys it by the
instance id, and ``release`` closes it.

Rewards: verl 0.9.1's ``ToolAgentLoop`` never calls ``calc_reward``: it scores the trajectory
with the reward function on the decoded text. So each call records the trajectory's session in
``agent_data.extra_fields["verify_cli_session"]``, which verl passes to the reward function as
``extra_info``, and :func:`verify_cli.adapters.verl.compute_score` answers the session's trusted
grade from it (submitting the session if the trajectory never did: the session ends with its
trajectory), never a grade of the text. ``submit``'s step reward is the trusted score (the task's
full tests); ``calc_reward`` (for loops that call it) is that score, submitting first if the
trajectory never did. Infrastructure errors are never a
score: ``submit`` answers step reward ``None`` with ``metrics["status"] == "infra_error"``, and
``calc_reward`` raises :class:`~verify_cli.adapters.grading.RewardInfraError` (verl fails the step
rather than learning from a reward the machinery made up). The agent's own mistakes (a missing
file, a bad argument) are observations, and a session the agent killed scores 0.

verl is imported when this module is (never by ``verify_cli.adapters``); without verl the class
stands on a stand-in with the same constructor, so that it can be used and tested directly.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verify_cli.adapters.grading import RewardInfraError
from verify_cli.adapters.verl import SESSION_FIELD as VERL_SESSION_FIELD
from verify_cli.adapters.verl import session_marker
from verify_cli.agents.tools import TOOLS, TOOLS_BY_NAME, truncate
from verify_cli.client import AsyncVerifyClient, ServiceRequestError, ServiceUnavailableError
from verify_cli.errors import UsageError

try:  # pragma: no cover - verl is not installable beside this project's transformers
    from verl.tools.base_tool import BaseTool as _Base
    from verl.tools.schemas import ToolResponse
except ImportError:
    @dataclass
    class ToolResponse:  # type: ignore[no-redef]
        """verl's ToolResponse (``verl/tools/schemas.py``): the text shown to the model."""

        text: str | None = None
        image: list[Any] | None = None
        video: list[Any] | None = None

    class _Base:  # type: ignore[no-redef]
        """verl's BaseTool constructor, for use without verl."""

        def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
            self.config = config
            self.tool_schema = tool_schema
            function = tool_schema["function"] if isinstance(tool_schema, Mapping) else tool_schema.function
            self.name = str(function["name"] if isinstance(function, Mapping) else function.name)

        def get_openai_tool_schema(self) -> Any:
            return self.tool_schema


def tool_config(url: str | None = None, *, token_env: str = "VERIFY_SERVE_TOKEN") -> dict[str, Any]:
    """verl's tool config (the YAML file ``actor_rollout_ref.rollout.multi_turn.tool_config_path``
    names) for the five tools over the service at ``url`` (None: ``$VERIFY_SERVE_URL``)."""
    config: dict[str, Any] = {"type": "native", "token_env": token_env}
    if url is not None:
        config["url"] = url
    return {"tools": [{"class_name": f"{__name__}.VerifyCliTool", "config": dict(config),
                       "tool_schema": spec.openai()} for spec in TOOLS]}


def tools_kwargs(task_id: str) -> dict[str, Any]:
    """A dataset row's ``extra_info["tools_kwargs"]`` for ``task_id``."""
    return {spec.name: {"create_kwargs": {"task_id": task_id}} for spec in TOOLS}


#: Submitted trajectories remembered by a process (their reward).
ENDED_KEPT = 4096
#: Open trajectories remembered by a process (verl's loop has no end-of-trajectory hook: the
#: reward function ends their sessions).
LIVE_KEPT = 16384
#: The key of ``agent_data.extra_fields`` (then of the reward function's ``extra_info``) that
#: names a trajectory's session: url, session_id, task_id, and its reward once submitted.
SESSION_FIELD = VERL_SESSION_FIELD


@dataclass
class _Episode:
    """One trajectory's session on the service."""

    key: str
    task_id: str
    client: AsyncVerifyClient
    session_id: str | None = None
    reward: dict[str, Any] | None = None
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)


class VerifyCliTool(_Base):
    """One of the five agent tools, over a ``verify-cli serve`` session (see the module)."""

    #: The trajectories' sessions of this process, by (url, key), shared by the five tools.
    _episodes: dict[tuple[str, str], _Episode] = {}
    #: One client per event loop, service and options, shared by every trajectory (a client
    #: per trajectory held its connections open for each trajectory that never submitted).
    _clients: dict[tuple[int, str, tuple[tuple[str, Any], ...]], AsyncVerifyClient] = {}

    def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
        super().__init__(config, tool_schema)
        if self.name not in TOOLS_BY_NAME:
            raise UsageError(f"verl tool config: function name {self.name!r} is not a verify-cli tool",
                             hint=f"name it one of {', '.join(TOOLS_BY_NAME)}")
        url = config.get("url") or os.environ.get("VERIFY_SERVE_URL")
        if not url:
            raise UsageError("verl tool config: no verify-cli service", hint="set config.url or VERIFY_SERVE_URL")
        self.url = str(url)
        token = config.get("token") or os.environ.get(str(config.get("token_env") or "VERIFY_SERVE_TOKEN"))
        self.observation_chars = int(config.get("observation_chars", 4000))
        self._client_options: dict[str, Any] = {"token": token or None,
                                                "max_retries": int(config.get("max_retries", 5)),
                                                "max_wait": float(config.get("max_wait", 10.0))}
        #: instance id -> (task id, the key of its episode once a call ran)
        self._instances: dict[str, dict[str, Any]] = {}

    # -- verl's BaseTool API -------------------------------------------------------------------

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """A tool instance for a trajectory; its task id from ``create_kwargs["task_id"]`` (or a
        ``task_id`` keyword). No session is opened until the first call runs."""
        create_kwargs = kwargs.get("create_kwargs")
        source: Mapping[str, Any] = create_kwargs if isinstance(create_kwargs, Mapping) else kwargs
        task_id = source.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise ValueError("verify-cli tool: create_kwargs/task_id is missing; put "
                             "verify_cli.adapters.verl_tool.tools_kwargs(task_id) in extra_info['tools_kwargs']")
        instance_id = instance_id or str(uuid.uuid4())
        self._instances[instance_id] = {"task_id": task_id, "key": None}
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
                      ) -> tuple[ToolResponse, float | None, dict[str, Any]]:
        """Run the tool in the trajectory's session: (what the model sees, the step reward:
        the score on ``submit``, else None; metrics)."""
        agent_data = kwargs.get("agent_data")
        episode = await self._episode(instance_id, agent_data)
        if episode.reward is not None:
            return self._text("the episode has ended (submitted)"), None, {"status": "ended"}
        try:
            sid = await self._session(episode)
            record, first = self._record(agent_data, episode, sid)
            # The first observation of a session names it: the reward function finds the
            # trajectory's own session by it (verl may hand samples of one prompt a shared
            # extra_info, holding every sample's session).
            marker = f"{session_marker(sid)}\n" if first else ""
            if self.name == "submit":
                reward = await episode.client.session_submit(sid)
                episode.reward = reward
                if record is not None:
                    record["reward"] = {"status": reward["status"], "score": reward["score"]}
                await self._forget(episode)
                score = reward["score"] if reward["status"] != "infra_error" else None
                text = (f"submitted: {reward['status']}, score {score}" if score is not None
                        else f"submitted, but the grading machinery failed: {reward['reason']}")
                return self._text(marker + text), score, {"status": reward["status"], "score": score}
            text = marker + await self._run(episode.client, sid, parameters)
        except ServiceRequestError as e:
            if e.status in (409, 410):
                return self._text(f"the session has ended: {e.message}"), None, {"status": e.code}
            if e.status >= 500:
                return self._text(f"the sandbox failed (not your fault): {e.message}"), None, {"status": "infra_error"}
            return self._text(f"{self.name}: {e.message}"), None, {"status": "error", "code": e.code}
        except ServiceUnavailableError as e:
            return self._text(f"the sandbox service is unavailable (not your fault): {e}"), None, \
                {"status": "infra_error"}
        return self._text(text), None, {"status": "ok"}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The trajectory's trusted score (submitting its files now if it never submitted).
        Raises :class:`RewardInfraError` when the machinery failed: never a made-up 0."""
        episode = await self._episode(instance_id, kwargs.get("agent_data"))
        if episode.reward is None:
            try:
                sid = await self._session(episode)
                episode.reward = await episode.client.session_submit(sid)
            except (ServiceRequestError, ServiceUnavailableError) as e:
                raise RewardInfraError(f"verify-cli could not grade the trajectory: {e}") from e
            await self._forget(episode)
        reward = episode.reward
        if reward["status"] == "infra_error" or reward["score"] is None:
            raise RewardInfraError(f"verify-cli could not grade the trajectory: {reward.get('reason')}")
        return float(reward["score"])

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Drop the instance. A session keyed by this instance (one instance per trajectory) is
        closed; one keyed by the request lives on for the trajectory's next call."""
        info = self._instances.pop(instance_id, None)
        if info is None or info["key"] != instance_id:
            return
        episode = self._episodes.pop((self.url, instance_id), None)
        if episode is not None:
            await self._close(episode)

    # -- trajectories --------------------------------------------------------------------------

    def _record(self, agent_data: Any, episode: _Episode, sid: str) -> tuple[dict[str, Any] | None, bool]:
        """Note the trajectory's session in ``agent_data.extra_fields`` under
        ``verify_cli_session/SID`` (verl 0.9.1's agent loop hands them to the reward function in
        ``extra_info``): :func:`verify_cli.adapters.verl.compute_score` answers the session's
        trusted grade from it, submitting the session first if the trajectory never did (which
        ends it with the trajectory). (the record, whether it is new)."""
        fields = getattr(agent_data, "extra_fields", None)
        if not isinstance(fields, dict):
            return None, False
        key = f"{SESSION_FIELD}/{sid}"
        record = fields.get(key)
        if isinstance(record, dict):
            return record, False
        record = {"url": self.url, "session_id": sid, "task_id": episode.task_id, "reward": None}
        fields[key] = record
        return record, True

    @classmethod
    async def end_trajectory(cls, request_id: str) -> None:
        """Close the session of a trajectory keyed by ``request_id`` (any service), if open."""
        for key in [k for k in cls._episodes if k[1] == request_id]:
            episode = cls._episodes.pop(key, None)
            if episode is not None:
                await cls._close(episode)

    @staticmethod
    async def _close(episode: _Episode) -> None:
        if episode.reward is not None:
            return  # submitted: the session is closed
        try:
            if episode.session_id is not None:
                await episode.client.close_session(episode.session_id)
        except (ServiceRequestError, ServiceUnavailableError):
            pass  # the service reclaims it when idle

    async def _forget(self, episode: _Episode) -> None:
        """A submitted episode keeps its reward (later calls learn it has ended); the oldest
        ended episodes are dropped past :data:`ENDED_KEPT`, the oldest open ones past
        :data:`LIVE_KEPT` (their sessions end when the reward function submits them, or idle)."""
        ended = [k for k, e in self._episodes.items() if e.reward is not None]
        for k in ended[:max(0, len(ended) - ENDED_KEPT)]:
            self._episodes.pop(k, None)
        self._drop_oldest_live()

    def _drop_oldest_live(self) -> None:
        live = [k for k, e in self._episodes.items() if e.reward is None]
        for k in live[:max(0, len(live) - LIVE_KEPT)]:
            self._episodes.pop(k, None)

    def _client(self) -> AsyncVerifyClient:
        key = (id(asyncio.get_running_loop()), self.url, tuple(sorted(self._client_options.items())))
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = AsyncVerifyClient(self.url, **self._client_options)
        return client

    async def _episode(self, instance_id: str, agent_data: Any) -> _Episode:
        info = self._instances.get(instance_id)
        if info is None:
            raise ValueError(f"verify-cli tool: no instance {instance_id!r} (create it first)")
        request_id = getattr(agent_data, "request_id", None)
        key = str(request_id) if request_id else instance_id
        info["key"] = key
        episode = self._episodes.get((self.url, key))
        if episode is None or episode.task_id != info["task_id"]:
            episode = _Episode(key, info["task_id"], self._client())
            self._episodes[(self.url, key)] = episode
            self._drop_oldest_live()
        return episode

    @staticmethod
    async def _session(episode: _Episode) -> str:
        async with episode.opening:
            if episode.session_id is None:
                episode.session_id = str((await episode.client.open_session(episode.task_id))["session_id"])
            return episode.session_id

    async def _run(self, client: AsyncVerifyClient, sid: str, parameters: Mapping[str, Any]) -> str:
        if self.name == "bash":
            r = await client.session_exec(sid, str(parameters.get("command", "")))
            head = (f"exit code {r['exit_code']}" if r["verdict"] in ("ok", "nonzero_exit")
                    else f"{r['verdict']}: {r['message']}".rstrip(": "))
            parts = [head] + [f"--- {k} ---\n{r[k]}" for k in ("stdout", "stderr") if r[k]]
            return "\n".join(parts)
        if self.name == "read_file":
            return await client.session_read(sid, str(parameters.get("path", "")))
        if self.name == "write_file":
            w = await client.session_write(sid, str(parameters.get("path", "")), str(parameters.get("content", "")))
            return f"wrote {w['bytes']} bytes to {w['path']}"
        t = await client.session_run_tests(sid)
        lines = [f"{t['passed']} passed, {t['failed']} failed"]
        for test in t["tests"]:
            message = truncate((test.get("message") or "").strip(), 400)[0]
            ok = test["outcome"] == "passed"
            lines.append(f"{test['outcome'].upper()} {test['id']}" + (f"\n  {message}" if message and not ok else ""))
        lines += [f"problem: {p}" for p in t["problems"][:3] if not t["tests"]]
        return "\n".join(lines)

    def _text(self, text: str) -> ToolResponse:
        return ToolResponse(text=truncate(text, self.observation_chars)[0])


__all__ = ["SESSION_FIELD", "ToolResponse", "VerifyCliTool", "tool_config", "tools_kwargs"]
