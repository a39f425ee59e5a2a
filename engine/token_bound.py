"""A lower bound on a text's token count from one pass over its bytes, without tokenizing it.

Tokenizing a module of a megabyte takes seconds, only to find it hundreds of times longer than the model's
context (engine.ModelEngine.prompt_ids). Byte-level BPE (a ByteLevel pre-tokenizer, no normalizer: what
passlm/tokenizer.py trains) covers the text's bytes with tokens, each token a run of its own bytes. Let
`longest[b]` be the length in bytes of the longest token (vocabulary or added) that holds byte b. A token of
n bytes holds only bytes with `longest[b] >= n`, so the sum of `1 / longest[b]` over its bytes is at most 1;
summed over all the text's bytes it is therefore at most the number of tokens.

The bound is derived from the tokenizer's own vocabulary, so it holds for any byte-level BPE tokenizer; for
other tokenizers (a normalizer may shorten the text) `TokenBound.of` gives None and the caller tokenizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table: `tokenizers`' ByteLevel writes vocabulary strings in it."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    for shift, b in enumerate(b for b in range(256) if b not in table):
        table[b] = chr(256 + shift)
    return table


@dataclass(frozen=True)
class TokenBound:
    weights: np.ndarray  # per byte value: 1 / bytes of the longest token holding it (0 if none holds it)

    @classmethod
    def of(cls, tokenizer) -> TokenBound | None:
        """The bound for a Hugging Face fast tokenizer; None unless byte-level BPE with no normalizer.

        Types are read by name: the runtime does not import `tokenizers` itself (tests/contracts).
        """
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if (
            backend is None
            or backend.normalizer is not None
            or type(backend.pre_tokenizer).__name__ != "ByteLevel"
            or type(backend.model).__name__ != "BPE"
        ):
            return None
        to_unicode = _bytes_to_unicode()
        if set(to_unicode.values()) != set(type(backend.pre_tokenizer).alphabet()):
            return None  # a `tokenizers` with another table: the vocabulary strings would be misread
        to_byte = {char: b for b, char in to_unicode.items()}
        added_tokens = list(tokenizer.added_tokens_decoder.values())
        if any(token.lstrip or token.rstrip for token in added_tokens):
            return None  # such a token also takes the whitespace beside it: more bytes than its own
        added = [token.content.encode() for token in added_tokens]
        longest = np.zeros(256)
        for piece in backend.get_vocab(with_added_tokens=False):
            if any(char not in to_byte for char in piece):
                return None
            data = bytes(to_byte[char] for char in piece)
            for b in set(data):
                longest[b] = max(longest[b], len(data))
        for data in added:
            for b in set(data):
                longest[b] = max(longest[b], len(data))
        # A byte no token holds counts for nothing: the bound holds whatever the tokenizer does with it.
        weights = np.divide(1.0, longest, out=np.zeros(256), where=longest > 0)
        return cls(weights)

    def least_tokens(self, text: str) -> int:
        """At most the number of tokens `text` encodes to (special tokens the tokenizer adds not counted)."""
        counts = np.bincount(np.frombuffer(text.encode(), dtype=np.uint8), minlength=256)
        # floor, less a hair for float rounding: the count itself is an integer at least the exact sum
        return max(0, int(np.floor(float(counts @ self.weights) - 1e-6)))

    @property
    def longest_token_bytes(self) -> int:
        return int(round(1 / self.weights[self.weights > 0].min()))
