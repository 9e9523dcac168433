# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, the workload: a real model on real data
#
# A benchmark needs a workload anyone can reproduce without a download: scikit-learn's `digits`
# set (1,797 real 8×8 grey-scale scans of handwritten digits, shipped inside its wheel) and a
# small CNN trained on it deterministically, then cached. `tito benchmark`, TinyMLPerf's digits
# task and the Olympics default to this pair, so every accuracy in the course uses real labels.
#
# ```
# digits (1797 × 8 × 8, labels 0–9) ── stratified split (seed 0) ──> train 75% │ test 25%
#   DigitsCNN: conv1 3×3 (1→16) ─ ReLU ─ maxpool 2 ─ conv2 3×3 (16→32) ─ ReLU ─ maxpool 2 ─ classifier (128→10)
# ```

# %%
#| default_exp benchmarking.digits

# %%
#| export
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tinytorch.benchmarking.results import top1_correct, write_atomic
from tinytorch.profiling.timing import fixed_threads

# %% [markdown]
# ## The data
#
# Pixels are integers 0–16, scaled to [0, 1] with a channel axis added: one sample is a
# `1 × 8 × 8` float32 tensor. The split is stratified (each digit in the same proportion in both
# halves) and fixed by `seed`, so the test set is the same on every machine.

# %%
#| export
DIGITS_INPUT_SHAPE = (1, 1, 8, 8)
DIGITS_CLASSES = 10


def load_digits_split(split: str = "test", seed: int = 0, test_fraction: float = 0.25) -> tuple[torch.Tensor, torch.Tensor]:
    """The `digits` images as float32 `(N, 1, 8, 8)` in [0, 1] and int64 labels 0-9, for one
    split: "train", "test" (a `test_fraction` of each class, fixed by `seed`) or "all"."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if split not in ("train", "test", "all"):
        raise ValueError(f"split: expected 'train', 'test' or 'all', got {split!r}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction: expected a fraction in (0, 1), got {test_fraction}")
    data = load_digits()
    X = (data.images / 16.0).astype(np.float32)[:, None, :, :]
    y = data.target.astype(np.int64)
    if split == "all":
        return torch.from_numpy(X), torch.from_numpy(y)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=test_fraction, random_state=seed, stratify=y)
    X_s, y_s = (X_tr, y_tr) if split == "train" else (X_te, y_te)
    return torch.from_numpy(np.ascontiguousarray(X_s)), torch.from_numpy(np.ascontiguousarray(y_s))


def digits_loader(split: str = "test", batch_size: int = 64, shuffle: bool = False, seed: int = 0) -> DataLoader:
    "A DataLoader over one split of `digits` (deterministic order unless `shuffle`)."
    X, y = load_digits_split(split, seed=seed)
    g = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(X, y), batch_size=batch_size, shuffle=shuffle, generator=g)

# %%
def test_unit_digits_data():
    (X_te, y_te), (X_tr, _) = load_digits_split("test"), load_digits_split("train")
    assert (len(X_te), len(X_tr)) == (450, 1347), f"digits: expected 450 + 1347 images, got {len(X_te)} + {len(X_tr)}"
    assert X_te.shape[1:] == (1, 8, 8) and X_te.dtype == torch.float32, f"got {X_te.shape}, {X_te.dtype}"
    assert 0.0 <= float(X_te.min()) and float(X_te.max()) <= 1.0, "pixels must be scaled to [0, 1]"
    assert set(y_te.tolist()) == set(range(10)), "a stratified split has every class"
    assert torch.equal(X_te, load_digits_split("test")[0]), "the split must be the same every time"
    try:
        load_digits_split("valid")
    except ValueError as e:
        assert "split" in str(e), f"the error should name 'split', got: {e}"
    else:
        raise AssertionError("load_digits_split('valid'): expected a ValueError naming 'split'")


if __name__ == "__main__":
    test_unit_digits_data()

# %% [markdown]
# ## The model, trained deterministically
#
# A fixed seed, one thread and mini-batches in a fixed order: one torch version gives the same
# weights everywhere. They are cached, keyed by the torch version and the recipe, and written
# atomically, so an interrupted first run never leaves a broken model.

# %%
#| export
class DigitsCNN(nn.Module):
    """A small CNN for 8×8 digits: conv1 → pool → conv2 → pool → classifier.

    >>> DigitsCNN()(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """

    def __init__(self, channels: tuple[int, int] = (16, 32), num_classes: int = DIGITS_CLASSES):
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.classifier = nn.Linear(c2 * 2 * 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.classifier(torch.flatten(x, 1))


TRAINING_RECIPE = {"epochs": 40, "batch_size": 32, "lr": 0.05, "momentum": 0.9, "seed": 0}


def train_digits_cnn(epochs: int | None = None, seed: int | None = None) -> DigitsCNN:
    """Train a `DigitsCNN` on the `digits` training split with SGD; deterministic for a torch version."""
    recipe = {**TRAINING_RECIPE, **{k: v for k, v in (("epochs", epochs), ("seed", seed)) if v is not None}}
    X, y = load_digits_split("train")
    with fixed_threads(1):
        torch.manual_seed(recipe["seed"])
        model = DigitsCNN()
        opt = torch.optim.SGD(model.parameters(), lr=recipe["lr"], momentum=recipe["momentum"])
        g = torch.Generator().manual_seed(recipe["seed"])
        model.train()
        for _ in range(recipe["epochs"]):
            order = torch.randperm(len(X), generator=g)
            for i in range(0, len(X), recipe["batch_size"]):
                idx = order[i:i + recipe["batch_size"]]
                opt.zero_grad()
                nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
                opt.step()
    return model.eval()


def default_digits_model(cache_dir: str | Path | None = None) -> DigitsCNN:
    """The bundled default model, in eval mode: a `DigitsCNN` trained at first use and cached in
    `cache_dir` (default `$TINYTORCH_CACHE`, else `~/.cache/tinytorch`)."""
    key = hashlib.sha256(repr((sorted(TRAINING_RECIPE.items()), torch.__version__)).encode()).hexdigest()[:12]
    cache = cache_dir or os.environ.get("TINYTORCH_CACHE", Path.home() / ".cache" / "tinytorch")
    path = Path(cache) / f"digits_cnn_{key}.pt"
    model = DigitsCNN()
    if path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()
    model = train_digits_cnn()
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    write_atomic(path, buf.getvalue())  # readers see the old state or the whole new file
    return model


def accuracy_on(model: Any, X: torch.Tensor, y: torch.Tensor) -> float:
    """Top-1 accuracy of a classifier on (X, y), a bare float for quick checks: the mean of the `ProportionResult`
    `metrics.accuracy_result(model, [(X, y)])`, which also carries its Wilson interval."""
    flags = top1_correct(model, (X, y))
    return sum(flags) / len(flags)

# %%
if __name__ == "__main__":
    model = default_digits_model()
    X_te, y_te = load_digits_split("test")
    print(f"DigitsCNN: {sum(p.numel() for p in model.parameters())} parameters; test accuracy "
          f"{accuracy_on(model, X_te, y_te):.2%} on {len(y_te)} real test images")

# %%
def test_module():
    "End to end: the default model is trained once, cached, reloaded unchanged, and accurate on real test images."
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        first = default_digits_model(cache_dir=tmp)
        assert len(list(Path(tmp).glob("digits_cnn_*.pt"))) == 1, "the trained model must be cached"
        second = default_digits_model(cache_dir=tmp)
        for a, b in zip(first.state_dict().values(), second.state_dict().values()):
            assert torch.equal(a, b), "loading from the cache must give the same weights"
    X_te, y_te = load_digits_split("test")
    acc, untrained = accuracy_on(first, X_te, y_te), accuracy_on(DigitsCNN(), X_te, y_te)
    assert acc >= 0.90, f"the default digits CNN should reach >= 90% test accuracy, got {acc:.2%}"
    assert untrained < 0.5, f"an untrained CNN should be near chance, got {untrained:.2%}"


if __name__ == "__main__":
    test_module()
