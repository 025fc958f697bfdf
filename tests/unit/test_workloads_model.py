"""The MLP, its checkpoint files and one training epoch (torch, in-process, a second or two)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from airflow_k8s_ml.errors import CheckpointError  # noqa: E402
from airflow_k8s_ml.workloads.dataset import load_digits, train_val  # noqa: E402
from airflow_k8s_ml.workloads.distributed import DistContext  # noqa: E402
from airflow_k8s_ml.workloads.model import (  # noqa: E402
    Architecture,
    DigitsMLP,
    TrainerState,
    load_model,
    load_trainer_state,
    predict,
    save_model,
    save_trainer_state,
)
from airflow_k8s_ml.workloads.training import evaluate, make_loader, to_tensors, train_one_epoch  # noqa: E402


def test_shapes_and_raw_pixel_input() -> None:
    model = DigitsMLP()
    logits = model(torch.full((5, 64), 16.0))
    assert logits.shape == (5, 10)
    assert [m.out_features for m in model.net if isinstance(m, torch.nn.Linear)] == [128, 64, 10]
    assert len(predict(model, [(0.0,) * 64] * 3)) == 3


def test_model_roundtrip_keeps_predictions(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = DigitsMLP(Architecture(hidden=(16,)))
    save_model(tmp_path / "model.pt", model)
    again = load_model(tmp_path / "model.pt")
    x = torch.rand(8, 64) * 16
    assert again.arch.hidden == (16,)
    assert torch.equal(model(x), again(x))


def test_foreign_or_missing_files_are_checkpoint_errors(tmp_path: Path) -> None:
    torch.save({"format": "something-else"}, tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match="not a airflow-k8s-ml/digits-mlp model"):
        load_model(tmp_path / "model.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_model(tmp_path / "junk.pt")
    with pytest.raises(CheckpointError, match="missing"):
        load_trainer_state(tmp_path / "nope.pt")


def test_trainer_state_roundtrip(tmp_path: Path) -> None:
    model = DigitsMLP()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(2, 64)).sum().backward()
    opt.step()
    save_trainer_state(tmp_path / "t.pt", TrainerState(3, 69, opt.state_dict()))
    state = load_trainer_state(tmp_path / "t.pt")
    assert (state.epoch, state.global_step) == (3, 69)
    fresh = torch.optim.Adam(model.parameters(), lr=0.01)
    fresh.load_state_dict(state.optimizer)
    assert fresh.state_dict()["state"][0]["step"] == 1


def test_sampler_order_depends_only_on_seed_and_epoch() -> None:
    train, _ = train_val(load_digits(), max_train_samples=64)

    def order(epoch: int) -> list[int]:
        _, sampler = make_loader(train, 16, seed=5, ctx=DistContext())
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(2) == order(2)
    assert order(2) != order(3)


def test_one_epoch_learns() -> None:
    torch.manual_seed(0)
    train, val = train_val(load_digits(), max_train_samples=600)
    model = DigitsMLP()
    vx, vy = to_tensors(val)
    before = evaluate(model, vx, vy)
    loader, _ = make_loader(train, 32, seed=0, ctx=DistContext())
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    stats = train_one_epoch(model, loader, opt, DistContext())
    after = evaluate(model, vx, vy)
    assert stats.steps == 19  # ceil(600 / 32)
    assert after.loss < before.loss
    assert after.accuracy > 0.5 > before.accuracy
