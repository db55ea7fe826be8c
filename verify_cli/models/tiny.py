"""A tiny randomly initialised causal language model, built offline from a config.

For tests, benchmarks and trying the pipeline without a real model: a 2-layer Llama-style
model with a byte-level tokenizer (it can spell any text: Python code, digits, JSON) and a
simple chat template, saved with ``save_pretrained`` so that the ``hf`` backend (and vLLM)
load it from the folder. Nothing is downloaded. Needs the ``train`` extra (torch, transformers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Special tokens, in id order after the 256 byte tokens.
PAD, EOS, BOS = "<|pad|>", "<|end|>", "<|begin|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def _byte_level_tokenizer() -> Any:
    """A ``tokenizers`` BPE over the 256 byte symbols (no merges) plus the special tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True) for t in (PAD, EOS, BOS, *ROLE_TOKENS)])
    return tok


def build_tiny_model(folder: Path, *, hidden_size: int = 64, layers: int = 2, heads: int = 4,
                     max_positions: int = 16384, seed: int = 0) -> Path:
    """Write a tiny random Llama-style model and its tokenizer to ``folder``; return ``folder``.

    The same arguments always give the same weights (seeded initialisation).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from verify_cli.models.hf import quiet_transformers

    quiet_transformers()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_byte_level_tokenizer(), pad_token=PAD,
                                        eos_token=EOS, bos_token=BOS)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(folder)

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    return folder
