"""Agent episodes: a model acting in a persistent sandbox session with tools, rewarded by the
trusted grader (beside ``rollout/``, never inside ``grading/``)."""

from verify_cli.agents.environment import EpisodeOutcome, TaskEnvironment
from verify_cli.agents.episode import AgentEpisode, AgentTurn, EpisodeJob, EpisodeLimits, run_episode, run_episodes
from verify_cli.agents.protocol import AgentModel, ModelTurn, agent_model
from verify_cli.agents.tools import TOOLS, ToolCall, ToolSpec

__all__ = ["TOOLS", "AgentEpisode", "AgentModel", "AgentTurn", "EpisodeJob", "EpisodeLimits", "EpisodeOutcome",
           "ModelTurn", "TaskEnvironment", "ToolCall", "ToolSpec", "agent_model", "run_episode", "run_episodes"]
