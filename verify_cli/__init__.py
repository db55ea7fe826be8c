"""verify-cli: curate and use verifiable tasks for LLM post-training."""

__version__ = "0.1.0"
