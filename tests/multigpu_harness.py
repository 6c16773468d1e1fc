"""Two-process training of a model made of two kgen blocks, against the same model made of the
reference modules (tests/test_multigpu.py; run by torch.multiprocessing.spawn, one process per
rank, rank r on cuda:r).

Each rank builds three copies of one seeded model: kgen's (ModelNew blocks), the reference's in
fp32 (eager) and the reference's in fp64, wraps each the same way (DDP, FSDP2's fully_shard, or
torch.compile of the DDP-wrapped model), and trains them side by side on the same per-rank data.
The yardstick is kgen's gate (kgen/check/validate.py's training check): kgen's error against
the fp64 run within the tolerance plus FP32_EXACT_FACTOR times eager fp32's own error, every
step's output and loss and, at the end, every parameter and buffer. Per-step times of kgen's
model and of eager fp32's are measured in the same run. torch.compile applies to kgen's model
alone (the references stay eager: eager fp32 is the yardstick).

Without a GPU (the CPU self-test) the "kgen" copy is the reference model and the backend gloo:
the plumbing is tested, not kgen.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import statistics
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn

from kgen.check.validate import FP32_EXACT_FACTOR, Comparison

TOL = 1e-4
STEPS = 20
LR = 0.5          # plain SGD on mean-over-batch losses; see the run's "moved" check


class Chain(nn.Module):
    """The blocks one after another (each block's output is the next one's input)."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _classes(cfg):
    """[(reference Model, ModelNew or None, init args)] per block."""
    from kgen.check.loading import EmittedFile
    from kgen.frontend.problems import load

    out = []
    for block in cfg["blocks"]:
        ref = load(block["problem"], block["batch"], block["in"], block["out"])
        new = EmittedFile(block["path"]).ModelNew if block.get("path") else None
        out.append((ref.Model, new, tuple(ref.init_args())))
    return out


def build_models(cfg, device):
    """(kgen fp32, reference fp32, reference fp64), the same seeded parameters."""
    classes = _classes(cfg)
    torch.manual_seed(0)
    ref = Chain([Model(*args) for Model, _, args in classes])
    new = Chain([(ModelNew or Model)(*args) for Model, ModelNew, args in classes])
    new.load_state_dict(ref.state_dict())
    ref64 = copy.deepcopy(ref).double()
    return new.to(device), ref.to(device), ref64.to(device)


def wrap(model, how: str, device):
    if how == "none":
        return model
    if how in ("ddp", "ddp_compile"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        return torch.compile(wrapped) if how == "ddp_compile" else wrapped
    if how == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        # Each block its own unit (ModelNew reads its Linear's weight in its own forward: the
        # block's pre-forward hook has gathered it there), then the root.
        for block in model.blocks:
            fully_shard(block)
        return fully_shard(model)
    raise ValueError(how)


def _full(t):
    t = t.detach()
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(cfg, rank: int, device) -> dict:
    how = cfg["wrap"]
    batch, n_in = cfg["blocks"][0]["batch"], cfg["blocks"][0]["in"]
    models = build_models(cfg, device)
    if cfg.get("sync_batchnorm"):
        models = tuple(nn.SyncBatchNorm.convert_sync_batchnorm(m) for m in models)
    names = [n for n, p in models[1].named_parameters()]
    start = {n: p.detach().clone() for n, p in models[2].named_parameters()}
    # ddp_compile: kgen's model compiled, the references eager (the yardstick is eager fp32)
    wrapped = [wrap(m, how if k == 0 or how != "ddp_compile" else "ddp", device) for k, m in enumerate(models)]
    opts = [torch.optim.SGD(w.parameters(), lr=cfg.get("lr", LR)) for w in wrapped]
    # per-rank data: every rank its own batch and loss weights
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.rand(batch, n_in, generator=gen).to(device)
    n_out = cfg["blocks"][-1]["out"]
    target = torch.randn(batch, n_out, generator=gen).to(device)
    outputs = Comparison(TOL, judge_by_fp64=True)
    losses: list[list[float]] = [[], [], []]
    step_s: list[list[float]] = [[], []]
    for step in range(cfg.get("steps", STEPS)):
        ys = []
        for k, (w, opt, dtype) in enumerate(zip(wrapped, opts, (torch.float32, torch.float32, torch.float64))):
            _sync(device)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            y = w(x.to(dtype))
            # dL/dy = target / batch: O(1/batch) per element however y is scaled (validate's
            # training check uses sum(G * y) for the same reason)
            loss = (y * target.to(dtype)).sum() / batch
            loss.backward()
            opt.step()
            _sync(device)
            if k < 2:
                step_s[k].append(time.perf_counter() - t0)
            losses[k].append(loss.item())
            ys.append(y.detach())
        outputs.add(f"rank {rank} step {step} output", *ys)
    # losses: within the tolerance (relative to the loss) or FP32_EXACT_FACTOR x eager's error
    loss_failures = []
    for step, (a, b, c) in enumerate(zip(*losses)):
        if not abs(a - c) <= TOL * (1 + abs(c)) + FP32_EXACT_FACTOR * abs(b - c):
            loss_failures.append(f"step {step}: loss {a!r} vs fp64 {c!r} (eager fp32 {b!r})")
    params = Comparison(TOL, relative_to_largest=True, gradients=True)
    tensors = [dict(m.named_parameters()) | dict(m.named_buffers()) for m in models]
    for what, a in tensors[0].items():
        if a.is_floating_point():
            params.add(what, _full(a), _full(tensors[1][what]), _full(tensors[2][what]))
    moved = {n: float((_full(dict(models[2].named_parameters())[n]) - _full(start[n])).abs().max())
             for n in names}
    warm = slice(3, None)   # the first steps build, compile and warm up
    return {
        "rank": rank, "device": str(device), "wrap": how,
        "outputs_ok": outputs.ok, "outputs_detail": "; ".join(outputs.failures[:3]),
        "outputs_max_abs": outputs.max_abs, "outputs_ratio": outputs.ratio,
        "params_ok": params.ok, "params_detail": "; ".join(params.failures[:3]),
        "params_max_abs": params.max_abs, "params_ratio": params.ratio,
        "loss_failures": loss_failures[:3], "losses": losses,
        "moved": moved,
        "step_ms": {"kgen": 1e3 * statistics.median(step_s[0][warm] or step_s[0]),
                    "reference": 1e3 * statistics.median(step_s[1][warm] or step_s[1])},
    }


def sync_batchnorm(cfg, rank: int, device) -> dict:
    """convert_sync_batchnorm on the kgen model, trained one step under DDP: refused, or (the
    reference's behaviour) matched."""
    try:
        r = train(dict(cfg, steps=2), rank, device)
    except RuntimeError as e:
        return {"rank": rank, "refused": str(e)}
    return {"rank": rank, "refused": None, **r}


def run_rank(rank: int, world: int, port: int, cfg: dict):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = cfg["backend"] == "nccl"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)   # two ranks on a small CPU: no oversubscription
    # A rank that fails leaves the other waiting in a collective: a timeout, not a hang.
    dist.init_process_group(cfg["backend"], rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=cfg.get("timeout_s", 240)),
                            **({"device_id": device} if cuda else {}))
    try:
        body = {"train": train, "sync_batchnorm": sync_batchnorm}[cfg["scenario"]]
        # cfg["wraps"]: several wrappings one after another in the same processes (spawn_wraps).
        for how in cfg.get("wraps") or [None]:
            try:
                result = body(cfg if how is None else dict(cfg, wrap=how), rank, device)
            except Exception:
                result = {"rank": rank, "error": traceback.format_exc()}
            name = f"rank{rank}.json" if how is None else f"rank{rank}_{how}.json"
            Path(cfg["out"], name).write_text(json.dumps(result))
        # Both ranks done before either tears its group down: a gloo rank that destroyed its
        # group while its peer's last collective was still in flight aborted ("terminate called
        # without an active exception", SIGABRT; once in CI on the 2-core machine under load).
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(cfg: dict, out: Path, world: int = 2) -> list[dict]:
    """Runs cfg on `world` ranks; returns each rank's result."""
    import torch.multiprocessing as mp

    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(cfg, out=str(out))
    mp.spawn(run_rank, args=(world, free_port(), cfg), nprocs=world, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def spawn_wraps(cfg: dict, wraps: list[str], out: Path, world: int = 2) -> dict[str, list[dict]]:
    """Runs cfg once per wrapping in `wraps`, one after another in the same `world` processes
    (each process starts, imports torch and joins the group once); returns each wrapping's
    per-rank results."""
    import torch.multiprocessing as mp

    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(cfg, out=str(out), wraps=list(wraps))
    mp.spawn(run_rank, args=(world, free_port(), cfg), nprocs=world, join=True)
    return {how: [json.loads((out / f"rank{r}_{how}.json").read_text()) for r in range(world)] for how in wraps}
