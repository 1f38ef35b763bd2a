"""A tiny causal LM made locally, saved in the Hugging Face format so every trainer loads it like a real
checkpoint: a Qwen3 architecture at random initialisation, and a byte-level BPE tokenizer trained with the
`tokenizers` package on the project's own prompts and kernels.

The tokenizer speaks the Qwen3 chat format: `<|im_start|>`/`<|im_end|>` turns, `<think>` blocks and the
`<tool_call>`/`<tool_response>` tags, with TRL's copy of the Qwen3 chat template, so TRL recognises the
template and parses tool calls with its Qwen3 response schema. As in Qwen's own tokenizer, the turn
markers are special tokens and the tool and think tags are added (non-special) tokens: a decode that
skips special tokens keeps the tags the parser needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

TURN_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


class TinyPolicySpec(BaseModel):
    """The architecture and the tokenizer's size; every seed is fixed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vocab_size: int = Field(default=4096, description="BPE vocabulary, special tokens included")
    hidden_size: int = 128
    intermediate_size: int = 384
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    max_positions: int = 16384
    seed: int = 0


def qwen3_chat_template() -> str:
    """TRL's copy of the Qwen3 chat template (read from the installed package, not copied here): the
    template TRL's `add_response_schema` recognises."""
    from trl.chat_template_utils import qwen3_chat_template as template

    return str(template)


def train_tokenizer(corpus: Iterable[str], spec: TinyPolicySpec):  # type: ignore[no-untyped-def]
    """A byte-level BPE over `corpus`, wrapped as a transformers fast tokenizer with the Qwen3 format.

    Pre-tokenization does not split on spaces or punctuation, so merges may span words: the prompts
    and kernels repeat, and a few hundred tokens cover an answer a small model must reproduce."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=TURN_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(corpus), trainer)
    tokenizer.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAG_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=spec.max_positions,
    )
    fast.chat_template = qwen3_chat_template()
    return fast


def new_model(spec: TinyPolicySpec, vocab_size: int, eos_token_id: int, pad_token_id: int):  # type: ignore[no-untyped-def]
    """A Qwen3 causal LM at random initialisation (seeded)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(spec.seed)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        head_dim=spec.hidden_size // spec.heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
    )
    return Qwen3ForCausalLM(config)


def save(model, tokenizer, directory: Path) -> None:  # type: ignore[no-untyped-def]
    directory.mkdir(parents=True, exist_ok=True)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
