"""passlm.soup: two fine-tunes' weights interpolated into a directory that loads like any model."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from optserve.passlm.soup import WEIGHTS_FILE, interpolate, main, soup
from optserve.passlm.tiny_model import build_tiny_model


@pytest.fixture(scope="module")
def parents(tmp_path_factory):
    """A tiny model and a copy whose weights are all tripled (a stand-in for its fine-tune)."""
    a = build_tiny_model(tmp_path_factory.mktemp("a"), seed=0)
    b = tmp_path_factory.mktemp("b")
    shutil.copytree(a, b, dirs_exist_ok=True)
    save_file({k: v * 3 for k, v in load_file(a / WEIGHTS_FILE).items()}, b / WEIGHTS_FILE)
    return a, b


def test_soup_interpolates_every_tensor_and_loads_as_a_model(parents, tmp_path):
    from transformers import LlamaForCausalLM

    a, b = parents
    out = soup(a, b, 0.25, tmp_path / "mix")
    original, mixed = load_file(a / WEIGHTS_FILE), load_file(out / WEIGHTS_FILE)
    assert mixed.keys() == original.keys()
    for name, tensor in original.items():  # 0.75 * w + 0.25 * 3w = 1.5 w
        torch.testing.assert_close(mixed[name].float(), 1.5 * tensor.float(), rtol=1e-2, atol=1e-3)
        assert mixed[name].dtype == tensor.dtype
    model = LlamaForCausalLM.from_pretrained(out)
    assert model(torch.tensor([[0, 5, 7]])).logits.shape[-1] == model.config.vocab_size
    assert (out / "profile.json").read_bytes() == (a / "profile.json").read_bytes()


def test_soup_ends_are_its_parents(parents, tmp_path):
    a, b = parents
    for alpha, parent in ((0.0, a), (1.0, b)):
        out = soup(a, b, alpha, tmp_path / str(alpha))
        for name, tensor in load_file(parent / WEIGHTS_FILE).items():
            assert torch.equal(load_file(out / WEIGHTS_FILE)[name], tensor)


def test_mismatched_models_are_refused(parents, tmp_path):
    a, _ = parents
    with pytest.raises(ValueError, match="different tensors"):
        interpolate({"x": torch.zeros(2)}, {"y": torch.zeros(2)}, 0.5)
    with pytest.raises(ValueError, match="shape"):
        interpolate({"x": torch.zeros(2)}, {"x": torch.zeros(3)}, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        interpolate({"x": torch.zeros(2)}, {"x": torch.zeros(2)}, 1.5)
    other = build_tiny_model(tmp_path / "other", seed=1)  # another tokenizer
    assert main([str(a), str(other), "--out", str(tmp_path / "bad")]) == 2
    assert not (tmp_path / "bad").exists()
