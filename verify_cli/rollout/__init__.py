"""Rollouts for RL: groups of completions, sandboxed rewards, advantages, Parquet trajectory shards."""
