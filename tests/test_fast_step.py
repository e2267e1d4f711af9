"""The training step's speed on a GPU, checked where no GPU is (issue 40's CPU half): a step never waits for the
device except where logging asks, and `micro_batch_size: auto` finds the largest micro-batch that fits."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mlmclm.io import working_root
from mlmclm.training import pretrain as pretrain_module
from mlmclm.training.pretrain import Trainer, pretrain
from test_pretrain import data_root, make_config, read_log, text_corpus  # noqa: F401  (fixtures)

# aten ops that make the host wait for a CUDA device: a value read back (.item(), float(), int(), bool()), or an
# output whose size depends on the data (nonzero, boolean indexing, unique, masked_select)
SYNCING = {"aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.unique_dim", "aten._unique",
           "aten._unique2", "aten.unique_consecutive", "aten.is_nonzero", "aten.equal"}
BOOL_INDEXED = {"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"}


class SyncSpy(TorchDispatchMode):
    """Records the ops that would make the host wait for a GPU, except while `host` (work meant for the host)."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []
        self.on_host = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if not self.on_host:
            indices = args[1] if name in BOOL_INDEXED and len(args) > 1 else ()
            if name in SYNCING or any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ()):
                self.seen.append(name)
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def host(self):
        self.on_host, was = True, self.on_host
        try:
            yield
        finally:
            self.on_host = was


def test_a_training_step_never_waits_for_the_device_and_logging_does(tmp_path, text_corpus, data_root,  # noqa: F811
                                                                     monkeypatch):
    """Every step of a mixed, a CLM and an MLM phase with document masking and clipping, run under a spy of the ops
    that sync a GPU: none in `train_step` (the batch, masks and labelled positions are made on the host, which the
    spy leaves out), the non-finite check and the loss read in `log`."""
    spy, per_step, at_log = SyncSpy(), {}, []
    train_step, log = Trainer.train_step, Trainer.log
    objective_batch, positions = Trainer.objective_batch, pretrain_module.label_positions

    def spied_step(self, step):
        before = len(spy.seen)
        with spy:
            train_step(self, step)
        per_step[step] = spy.seen[before:]

    def spied_log(self, step):
        before = len(spy.seen)
        with spy:
            log(self, step)
        at_log.append(spy.seen[before:])

    def on_host(function):
        def run(*args, **kwargs):
            with spy.host():
                return function(*args, **kwargs)
        return run

    monkeypatch.setattr(Trainer, "train_step", spied_step)
    monkeypatch.setattr(Trainer, "log", spied_log)
    monkeypatch.setattr(Trainer, "objective_batch", on_host(objective_batch))
    monkeypatch.setattr(pretrain_module, "label_positions", on_host(positions))
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="sync", log_every=3,
                      phases=(("mix1clm3mlm40", 2), ("clm", 2), ("mlm40", 2)), data={"document_masking": True},
                      optim={"warmup_steps": 1, "decay_steps": 2, "grad_clip": 1.0}, checkpoint={"steps": []})
    pretrain(cfg, root=working_root())
    assert sorted(per_step) == list(range(1, 7))
    assert per_step == {s: [] for s in range(1, 7)}, "ops that wait for a GPU inside a training step"
    assert at_log and all("aten._local_scalar_dense" in ops for ops in at_log)  # the spy sees what logging reads
    assert [r["step"] for r in read_log(cfg)] == ["3", "4", "6"]  # every 3 steps, and before the decay


def test_the_spy_sees_what_syncs():
    spy, x = SyncSpy(), torch.arange(6.0)
    with spy:
        x[x > 2].sum().item()
        x.reshape(-1).index_select(0, torch.tensor([1, 2]))
        with spy.host():
            x.nonzero()
    assert spy.seen == ["aten.index", "aten._local_scalar_dense"]


def test_label_positions_give_the_boolean_indexings_loss_and_gradients():
    from mlmclm.models.configuration import MlmClmConfig
    from mlmclm.models.modeling import MlmClmForMaskedLM

    torch.manual_seed(0)
    model = MlmClmForMaskedLM(MlmClmConfig.from_size("tiny", vocab_size=300))
    ids = torch.randint(4, 300, (3, 16))
    labels = torch.where(torch.rand(ids.shape) < 0.4, ids, -100)
    out = {}
    for name, positions in (("mask", None), ("positions", pretrain_module.label_positions(labels))):
        model.zero_grad(set_to_none=True)
        loss = model(ids, labels=labels, label_positions=positions).loss
        loss.backward()
        out[name] = (loss.detach(), [p.grad.clone() for p in model.parameters()])
    assert torch.equal(out["mask"][0], out["positions"][0])
    assert all(torch.equal(a, b) for a, b in zip(out["mask"][1], out["positions"][1]))


def test_the_largest_micro_batch_that_fits_is_a_divisor_of_the_local_batch():
    from mlmclm.errors import ConfigError
    from mlmclm.training.build import fitting_micro_batch

    tried = []
    assert fitting_micro_batch(24, lambda m: tried.append(m) or m <= 5) == 4
    assert tried == [24, 12, 8, 6, 4]
    with pytest.raises(ConfigError, match="not one sequence's forward and backward fits"):
        fitting_micro_batch(8, lambda m: False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without a GPU")
def test_auto_micro_batch_is_refused_in_one_line_without_a_gpu(tmp_path, text_corpus, data_root):  # noqa: F811
    from mlmclm.errors import ConfigError

    cfg = make_config(tmp_path, text_corpus, data_root, run_id="auto", micro_batch_size="auto")
    with pytest.raises(ConfigError, match=r"micro_batch_size: auto .* this machine has none; set micro_batch_size"):
        pretrain(cfg, root=working_root())
    assert not (tmp_path / "runs" / "test" / "auto").exists()


def test_auto_micro_batch_tries_sizes_until_one_fits_and_leaves_the_model_as_it_was(tmp_path, monkeypatch):
    """The probe on CPU, a GPU's out-of-memory played by the model above 2 sequences: 8, then 4 fail, 2 fits; the
    weights, gradients and random state after it as before, and room held for AdamW's moments while it tries."""
    from accelerate import Accelerator

    from mlmclm.config import PretrainConfig, load_config
    from mlmclm.models.configuration import MlmClmConfig
    from mlmclm.models.modeling import MlmClmForMaskedLM
    from mlmclm.training.build import Built, micro_batch_from_memory, run_optimizer

    torch.manual_seed(0)
    model = MlmClmForMaskedLM(MlmClmConfig.from_size("tiny", vocab_size=300))
    cfg = load_config(PretrainConfig, {"batch_size": 8, "micro_batch_size": "auto", "data": {"seq_len": 16},
                                       "phases": [["clm", 10]], "optim": {"warmup_steps": 1, "decay_steps": 1}})
    accelerator = Accelerator(cpu=True)
    optimizer = run_optimizer(model, cfg.optim)
    built = Built(None, tmp_path, None, model, model, optimizer)
    tried, forward = [], MlmClmForMaskedLM.forward

    def small_gpu(self, input_ids=None, **kwargs):
        tried.append(len(input_ids))
        if len(input_ids) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (played)")
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(MlmClmForMaskedLM, "forward", small_gpu)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    empty_like, moments = torch.empty_like, []
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: (moments.append(t.numel()) if kw.get("dtype") is
                                                            torch.float32 else None) or empty_like(t, **kw))
    weights, rng = {k: v.clone() for k, v in model.state_dict().items()}, torch.get_rng_state()
    assert micro_batch_from_memory(cfg, built, accelerator) == 2
    assert tried == [8, 4, 2]
    assert sum(moments) == 3 * 2 * sum(p.numel() for p in model.parameters())  # two moments, each of 3 trials
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
    assert all(p.grad is None for p in model.parameters()) and torch.equal(rng, torch.get_rng_state())
