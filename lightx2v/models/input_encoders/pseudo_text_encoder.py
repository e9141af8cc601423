"""Deterministic pseudo text embeddings: the embedded workload has no text encoder.

Each word or punctuation mark maps to a fixed random vector seeded by its SHA-256, so the same prompt always
gives the same features and the text length (and thus the attention shape) follows the prompt, as with a
real tokenizer + encoder. The features carry no meaning.
"""

from __future__ import annotations

import hashlib
import re

import torch

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def tokenize(text: str, max_len: int) -> list[str]:
    """Words and punctuation, truncated to `max_len`; an empty prompt becomes one padding token."""
    return _TOKEN.findall(text)[:max_len] or ["<pad>"]


def embed_prompt(text: str, dim: int, max_len: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(1, tokens, dim) features for `text`, identical on every machine, rank and run."""
    gen = torch.Generator(device="cpu")
    rows = []
    for token in tokenize(text, max_len):
        gen.manual_seed(int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "little") >> 1)
        rows.append(torch.randn(dim, generator=gen))
    return torch.stack(rows)[None].to(device=device, dtype=dtype)
