"""Fixtures for the rollout tests: the toy sum tasks and a small-vocabulary random model for them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOY_TASKS = Path(__file__).resolve().parent.parent / "fixtures" / "toy_sums"
#: Characters the toy model can spell; everything else in a prompt reads as <unk>.
TOY_ALPHABET = "0123456789 +?=.\n"


def build_toy_model(folder: Path, *, seed: int = 0, hidden_size: int = 32, layers: int = 1) -> Path:
    """A random Llama-style model over a character vocabulary of 19 tokens (no chat template):
    small enough that GRPO on CPU moves it within a few dozen steps."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<|end|>"]
    vocab = {t: i for i, t in enumerate([*specials, *TOY_ALPHABET])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                        eos_token="<|end|>")
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                         # 8,192: an agent episode's prompt (the tools' instructions, every turn)
                         # runs past 2,048 characters, and a prompt longer than the context is
                         # never generated (prompt_too_long)
                         max_position_embeddings=8192, tie_word_embeddings=True,
                         pad_token_id=vocab["<pad>"], eos_token_id=vocab["<|end|>"])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = vocab["<pad>"]
    model.generation_config.eos_token_id = vocab["<|end|>"]
    model.save_pretrained(folder)
    return folder


def _needs_train_extra() -> None:
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("needs torch and transformers (pip install 'verify-cli[train]')")


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _needs_train_extra()
    return build_toy_model(tmp_path_factory.mktemp("toy-model"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The byte-level tiny model of verify_cli.models.tiny (for the sample tasks)."""
    _needs_train_extra()
    from verify_cli.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), hidden_size=32, layers=1, heads=2)
