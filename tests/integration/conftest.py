"""Fixtures for end-to-end runs: a tiny random Llama saved as a Hugging Face directory (SmolLM2's
tokenizer, no weights downloaded) and small task files, so ``execrl train`` runs in seconds per step."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # toy_domain, importable by "module:function" paths


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from execrl.rollout.models import default_tokenizer, tiny_model

    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_model(seed=0).save_pretrained(path)
    default_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def caps_or_eos_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that writes words starting A-F or ends its turn (EOS ``<|im_end|>`` about one token in
    seven): the final norm keeps one dimension and the head reads only it, so an answer passes the toy
    reward (every word A-F), is empty (EOS first: no words, reward 0), or is cut by the token cap."""
    import torch

    from execrl.rollout.models import default_tokenizer, tiny_model

    tokenizer = default_tokenizer()
    model = tiny_model(seed=0)
    with torch.no_grad():
        model.model.norm.weight.zero_()
        model.model.norm.weight[0] = 1.0
        head = model.lm_head.weight
        head.zero_()
        head[tokenizer.convert_tokens_to_ids("<|im_end|>"), 0] = -19.9
        for letter in "ABCDEF":
            head[tokenizer(f" {letter}", add_special_tokens=False)["input_ids"][0], 0] = -20.0
    path = tmp_path_factory.mktemp("caps-or-eos")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def toy_tasks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import toy_domain

    from execrl.tasks import save_tasks

    path = tmp_path_factory.mktemp("toy") / "toy.jsonl"
    save_tasks(toy_domain.toy_tasks(16, "train") + toy_domain.toy_tasks(8, "test"), str(path))
    return path


@pytest.fixture(scope="session")
def second_domain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second training domain (the toy tasks under other ids) for the two-domain scheduler runs."""
    import dataclasses

    import toy_domain

    from execrl.tasks import save_tasks

    tasks = [
        dataclasses.replace(t, id=t.id.replace("toy/", "toy2/")) for t in toy_domain.toy_tasks(6, "train")
    ]
    path = tmp_path_factory.mktemp("toy2") / "toy2.jsonl"
    save_tasks(tasks, str(path))
    return path


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance (2 CPUs) per test module that asks for it: one start per module keeps the Ray
    tests inside their time budget."""
    import ray

    from execrl.distributed.ray_executor import ensure_ray

    assert ensure_ray(None, num_cpus=2)
    yield
    ray.shutdown()
