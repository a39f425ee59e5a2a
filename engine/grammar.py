"""Grammar: a regular expression compiled to a token-level automaton over a tokenizer's vocabulary.

`outlines_core` builds the automaton (`Index`); this module only maps a Hugging Face tokenizer's vocabulary to
the bytes each token stands for, which is where tokenizers differ:
- byte-level BPE (GPT-2, Llama 3, ours): every token is a string of stand-in characters for bytes, mapped back
  with the GPT-2 byte table; a token may hold half of a UTF-8 character;
- SentencePiece-style (Llama 2, Code Llama): "▁" stands for a space and `<0xNN>` tokens for raw bytes;
- added tokens (our pass names) are literal text, whatever the model's base vocabulary does.
vLLM's `_reduced_vocabulary` (vllm/v1/structured_output/utils.py) does the same job for its own backends.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache

import outlines_core

SENTENCEPIECE_SPACE = "\u2581"
_SENTENCEPIECE_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@cache
def _gpt2_unicode_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's byte -> printable-character table used by byte-level BPE tokenizers."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    byte_values, chars = printable[:], printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            byte_values.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(byte_values, chars, strict=True)}


def _decoder_kinds(tokenizer) -> set[str]:
    """The decoder types of a fast tokenizer's pipeline ("ByteLevel", "Metaspace", "ByteFallback", ...)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return set()
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    kinds = {decoder.get("type", "")}
    for part in decoder.get("decoders", []) or []:
        kinds.add(part.get("type", ""))
        if part.get("type") == "Replace" and SENTENCEPIECE_SPACE in json.dumps(part):
            kinds.add("Metaspace")
    return kinds


def token_bytes(tokenizer) -> dict[int, bytes]:
    """The bytes each non-special token of a HF tokenizer stands for (tokens decoding to nothing left out)."""
    kinds = _decoder_kinds(tokenizer)
    special_ids = set(tokenizer.all_special_ids)
    added = {i: t.content for i, t in tokenizer.added_tokens_decoder.items() if i not in special_ids}
    unicode_to_byte = _gpt2_unicode_to_byte()
    result: dict[int, bytes] = {}
    for token, token_id in tokenizer.get_vocab().items():
        if token_id in special_ids:
            continue
        if token_id in added:
            data = added[token_id].encode()
        elif "ByteLevel" in kinds and all(c in unicode_to_byte for c in token):
            data = bytes(unicode_to_byte[c] for c in token)
        elif (match := _SENTENCEPIECE_BYTE.match(token)) and "ByteFallback" in kinds:
            data = bytes([int(match.group(1), 16)])
        elif "Metaspace" in kinds:
            data = token.replace(SENTENCEPIECE_SPACE, " ").encode()
        else:
            data = tokenizer.convert_tokens_to_string([token]).encode()
        if data:
            result[token_id] = data
    return result


def outlines_vocabulary(tokenizer) -> outlines_core.Vocabulary:
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no EOS token; a constrained answer needs one to end")
    by_bytes: dict[bytes, list[int]] = {}
    for token_id, data in token_bytes(tokenizer).items():
        if token_id != eos:
            by_bytes.setdefault(data, []).append(token_id)
    return outlines_core.Vocabulary(eos, by_bytes)


def strip_anchors(regex: str) -> str:
    """outlines_core matches the whole text already; `^`/`$` anchors are not part of its dialect."""
    regex = regex.removeprefix("^").removeprefix(r"\A")
    if regex.endswith("$") and not regex.endswith(r"\$"):
        regex = regex[:-1]
    return regex.removesuffix(r"\Z").removesuffix(r"\z")


@dataclass
class TokenGrammar:
    """A regex as a token automaton: which tokens may come next in each state.

    States are outlines_core's integers; `next_state` returns None for a token the regex does not allow.
    EOS is allowed exactly in final states.
    """

    regex: str
    eos_token_id: int
    index: outlines_core.Index
    token_bytes: dict[int, bytes]
    _allowed: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, regex: str, tokenizer) -> TokenGrammar:
        return cls.from_vocabulary(
            regex, outlines_vocabulary(tokenizer), tokenizer.eos_token_id, token_bytes(tokenizer)
        )

    @classmethod
    def from_vocabulary(cls, regex, vocabulary, eos_token_id, bytes_by_id) -> TokenGrammar:
        regex = strip_anchors(regex)
        return cls(regex, eos_token_id, outlines_core.Index(regex, vocabulary), bytes_by_id)

    @property
    def initial_state(self) -> int:
        return self.index.get_initial_state()

    def allowed_tokens(self, state: int) -> tuple[int, ...]:
        """Token ids allowed in `state`, sorted (EOS included in final states)."""
        allowed = self._allowed.get(state)
        if allowed is None:
            allowed = tuple(sorted(self.index.get_allowed_tokens(state)))
            self._allowed[state] = allowed
        return allowed

    def next_state(self, state: int, token_id: int) -> int | None:
        if token_id == self.eos_token_id:
            return state if self.index.is_final_state(state) else None
        return self.index.get_next_state(state, token_id)

    def walk(self, token_ids) -> int | None:
        """The state after `token_ids` from the start, or None if the regex does not allow them."""
        state = self.initial_state
        for token_id in token_ids:
            state = self.next_state(state, token_id)
            if state is None:
                return None
        return state

    def only_eos_allowed(self, state: int) -> bool:
        """The answer is complete: only EOS may follow, so decoding can stop without asking the model."""
        return self.allowed_tokens(state) == (self.eos_token_id,)

    def decode(self, token_ids) -> str:
        return b"".join(self.token_bytes.get(t, b"") for t in token_ids).decode("utf-8", errors="replace")
