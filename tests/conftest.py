import functools
import gc
import hashlib
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

# The cyclic garbage collector, tuned for a test run: the tier makes millions of short-lived
# objects (an emitted file's syntax tree alone is ~100k nodes) beside a large heap that lives
# for the run (torch, kgen, the collected tests), and with Python's defaults (700, 10, 10) a
# tenth of its CPU time went to collections walking that heap (15 s of 52 s over test_styles,
# test_render and test_kernelbench_corpus; 2.3 s with these). The heap standing after
# collection is frozen out of the collector's reach (pytest_collection_finish).
GC_THRESHOLDS = (50_000, 20, 10)
gc.set_threshold(*GC_THRESHOLDS)

REFS_DIR = Path(__file__).resolve().parent / "refs"
# References of tests/refs/ that kgen refuses, with a word the refusal names.
REFUSED_REFS = {"conv2d_relu": "Conv2d", "gemm_cumsum": "cumsum"}
# The modules kgen synthesizes.
SYNTHESIZED_REFS = sorted(p.resolve() for p in REFS_DIR.glob("*.py") if p.stem not in REFUSED_REFS)

_MODULE = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
{init}

    def forward(self, x):
{body}
        return x


batch_size = 8
in_features = 16
out_features = {out_features}


def get_inputs():
    return [torch.rand(batch_size, in_features{dtype_arg})]


def get_init_inputs():
    return [in_features, out_features]
'''


def reference_text(init: list[str], body: list[str], out_features: int, dtype: str | None = None) -> str:
    """A reference file in KernelBench form: `init` the lines of __init__, `body` those of forward
    (on x, which it returns); dtype ("bfloat16", ...): get_inputs()' tensor in that dtype."""
    return _MODULE.format(init="\n".join(f"        {line}" for line in init),
                          body="\n".join(f"        {line}" for line in body), out_features=out_features,
                          dtype_arg=f", dtype=torch.{dtype}" if dtype else "")


def module_source(body: str, params: dict[str, str], out_features: int, gemm: str = "gemm",
                  dtype: str | None = None) -> str:
    """A reference file in KernelBench form: Linear `gemm`, then the lines of `body` (any common
    indentation is removed) on x; `params` maps attribute names to the expressions that create
    them (in __init__, after the Linear). dtype ("bfloat16", ...): the module as its author
    writes it in that dtype, the Linear's weights and get_inputs()' tensor."""
    dtype_arg = f", dtype=torch.{dtype}" if dtype else ""
    init = [f"self.{gemm} = nn.Linear(in_features, out_features{dtype_arg})"]
    init += [f"self.{name} = {expr}" for name, expr in params.items()]
    return reference_text(init, [f"x = self.{gemm}(x)"] + textwrap.dedent(body).strip("\n").splitlines(),
                          out_features, dtype)


# Where the CPU tier's nvcc jobs leave their results for the run (tests/nvcc_jobs.py): one
# folder per run, made by the controller of a pytest-xdist run (or the one process of a plain
# run) before the workers start, which inherit the variable, and removed at its end; so two
# workers that start one job (each starts every collected test's) run nvcc once.
NVCC_RESULTS = "KGEN_TEST_NVCC_RESULTS"


def nvcc_prefetch(jobs_of):
    """Marks a test with the nvcc jobs it waits for, `jobs_of(params)` (params: the test's
    parametrization by name), which pytest_collection_finish starts in the background. The test
    asks for the same jobs (nvcc_jobs.result), made by the same function."""
    return pytest.mark.nvcc_jobs.with_args(jobs_of)   # (called with a function alone, a mark decorates it)


def prefetch_dir(name: str, params: dict) -> Path:
    """A folder of this process for the reference file a test's `jobs_of` writes at collection,
    one per test and parametrization (`params`): a test writes its own into tmp_path, and the
    CUDA source must not depend on the folder, only on the file's name, or the test's job is
    another one and nvcc runs twice. (One folder for every parametrization would hand the second
    a trace of the first's file: a reference is traced once per path.)"""
    key = hashlib.sha256(repr(sorted(params.items())).encode()).hexdigest()[:12]
    folder = _prefetch_root() / f"{name}_{key}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@functools.cache
def _prefetch_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="kgen-test-prefetch-"))


def sm90a_check(source: str) -> list:
    """The one nvcc job of a test that checks `source` compiles for sm_90a without spills
    (tests/test_compile.py's compile_check with targets (SM90A,)), for nvcc_prefetch."""
    from nvcc_jobs import SM90A, check_job

    return [check_job(source, (SM90A,))]


def pytest_configure(config):
    config.addinivalue_line("markers", "nvcc_jobs(jobs_of): the nvcc jobs the test waits for (conftest.nvcc_prefetch)")
    if not hasattr(config, "workerinput") and NVCC_RESULTS not in os.environ:
        config.kgen_nvcc_results = tempfile.mkdtemp(prefix="kgen-test-nvcc-")
        os.environ[NVCC_RESULTS] = config.kgen_nvcc_results


def pytest_unconfigure(config):
    folder = getattr(config, "kgen_nvcc_results", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(NVCC_RESULTS, None)
    if _prefetch_root.cache_info().currsize:
        shutil.rmtree(_prefetch_root(), ignore_errors=True)


def pytest_collection_finish(session):
    """Every collected test's nvcc jobs started, the longest first, while the tests run: a
    pytest-xdist worker collects every test, so each starts all of them, and the two take turns
    through the jobs' locks (nvcc_jobs._run_once) rather than compile one source twice."""
    import nvcc_jobs

    gc.freeze()   # (see GC_THRESHOLDS)
    if nvcc_jobs.NVCC is None or session.config.option.collectonly:   # (--collect-only runs no test)
        return
    jobs = []
    for item in session.items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        for marker in item.iter_markers("nvcc_jobs"):
            jobs += marker.args[0](params)
    nvcc_jobs.prefetch(jobs)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run `pytest -m gpu` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def build_once(tmp_path_factory, name: str, candidates, jobs: int, timeout: float, echo) -> None:
    """A GPU module's builds, up front and in parallel. Under pytest-xdist one worker builds while
    the others wait on a lock, then find every build cached (kgen's build cache is keyed by the
    source, which the workers' files share): not every worker compiling all of them at once."""
    import fcntl

    from kgen.tune.search import build_all

    with open(tmp_path_factory.getbasetemp().parent / f"{name}_builds.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build_all(candidates, jobs, timeout, echo)


def tf32x3_wgmma_files(tmp_path_factory, name: str, modules: dict) -> dict:
    """The GPU tier's emitted files of user-style references: `modules` maps a case to (the
    reference's path, batch, in_features, out_features); each is written with the tf32x3 wgmma
    variant on 128 x 128 tiles (the variant the ragged and output-shape tiers judge) and all are
    built up front (build_once, under the lock `name`). The case -> EmittedFile, {} off a Hopper GPU
    (the tests then skip)."""
    import torch

    from kgen.check.loading import EmittedFile
    from kgen.codegen import generator
    from kgen.tune.search import Candidate
    from kgen.tune.spec import Spec, Tile

    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        return {}
    d = tmp_path_factory.mktemp(name)
    candidates = {}
    for case, (path, batch, in_features, out_features) in modules.items():
        spec = Spec.of(str(path), batch, in_features, out_features, math="tf32x3", backend="wgmma",
                       fusion=1, tile=Tile(128, 128, 32, 16, 128, stages=4))
        candidates[case] = Candidate(spec, generator.write(spec, d / f"{spec.name()}.py"))
    build_once(tmp_path_factory, name, list(candidates.values()), 8, 900, lambda line: None)
    return {case: EmittedFile(c.path) for case, c in candidates.items()}


def gate_failures(results, dtype) -> list:
    """The failed checks of kgen's gate (validate's results) as lines, but KernelBench's allclose
    against eager in a 16-bit dtype where kgen is no farther from fp64 than eager is: the judge asks
    for eager's rounding there, not for accuracy (docs/perf.md, session 56)."""
    import torch

    from kgen.check.validate import KERNELBENCH_CHECK

    return [r.line() for r in results if not r.passed
            and not (dtype != torch.float32 and r.name == KERNELBENCH_CHECK and r.max_abs <= r.ref_abs)]


def assert_same_bits_every_call(f, rows: int, calls: int = 3, dtype=None) -> None:
    """A fresh ModelNew of the emitted file `f` (seeded alike each time; in `dtype` where given,
    as module.to(dtype)) called on one input of `rows` rows `calls` times: its output and buffers
    (BatchNorm's running statistics) bit for bit the same every time. For the kernels whose sums
    meet across CTAs or warps in a fixed order."""
    import torch

    dtype = dtype or torch.float32
    torch.manual_seed(0)
    with torch.device("cuda"):
        x = torch.rand(rows, f.spec.in_features).to(dtype)
        outs = []
        for _ in range(calls):
            torch.manual_seed(1)
            model = f.ModelNew(*f.init_args()).cuda().to(dtype)
            with torch.no_grad():
                outs.append((model(x), [b.clone() for b in model.buffers()]))
    for out, buffers in outs[1:]:
        assert torch.equal(out, outs[0][0])
        assert all(torch.equal(a, b) for a, b in zip(buffers, outs[0][1]))


class StandInLibrary:
    """An emitted file's compiled library, for CPU tests of the Python around its kernels: the
    forward and backward entries of part 0 record each call's arguments by name (M, N, K, the
    tensors' data pointers) and their kernels do nothing."""

    def __init__(self, names, backward_names=()):
        self.names, self.calls = names, []
        self.backward_names, self.backward_calls = backward_names, []

    def kgen_workspace_floats_0(self, M, N, K):
        return 1

    def kgen_w_split_floats_0(self, M, N, K):
        return 0

    def kgen_w_split_records_floats_0(self, M, N, K):
        return 0

    def kgen_trusted_w_split_floats_0(self, M, N, K):
        return 0

    def kgen_forward_0(self, *values):
        self.calls.append(dict(zip(self.names, values)))

    def kgen_backward_floats_0(self, M, N, K, g_numel):
        return 1

    def kgen_backward_0(self, *values):
        self.backward_calls.append(dict(zip(self.backward_names, values)))


def stand_in_launch(module, launches=None):
    """A stand-in for an emitted file's _kgen_launch of part 0 on CPU tensors, for tests of the
    Python around its kernels: z = x w^T (kept where the body hands it z_out), out = 2 z, and in
    training mode a BatchNorm's running mean + 1, written through the data pointer the body passes
    (as the kernels write it: the tensor's version is the Python's business). Appends "forward"
    to `launches` on each call."""
    import ctypes

    names = [name for name, _ in module._KGEN_FORWARD_ARGS[0]]
    names = names[names.index("z_out") + 1:]   # (what the part's body passes after z_out)

    def launch(part, x, w, autocast, training, z_out, *rest):
        if launches is not None:
            launches.append("forward")
        args = dict(zip(names, rest))
        z = x.float() @ w.float().t()
        if z_out is not None:
            z_out[:z.numel()] = z.reshape(-1)
        if training and args.get("running_mean") is not None:
            dtype = torch.float32 if autocast else x.dtype   # (the parameters' dtype)
            n = w.shape[0]
            memory = (ctypes.c_byte * (n * dtype.itemsize)).from_address(args["running_mean"])
            torch.frombuffer(memory, dtype=dtype).add_(1)
        return (2 * z).to(x.dtype)
    return launch


def launch_on_cpu(module, monkeypatch) -> StandInLibrary:
    """An emitted file's `module` made to launch on CPU tensors against a StandInLibrary (its build,
    device guard and stream replaced), which it returns."""
    import contextlib

    library = StandInLibrary([name for name, _ in module._KGEN_FORWARD_ARGS[0]],
                             [name for name, _ in module._KGEN_BACKWARD_ARGS[0] or ()])
    monkeypatch.setattr(module, "_kgen_build", lambda device=None, dtype=torch.float32, autocast=False, fp32_weight=False: library)
    monkeypatch.setitem(module._KGEN_OUTPUT_TYPED, library, [True])
    monkeypatch.setattr(module, "_kgen_on", lambda device: contextlib.nullcontext())
    # (the stream the launches name: 0, whatever torch's build; a CUDA build's raw getter takes no CPU device)
    monkeypatch.setattr(module, "_kgen_stream", lambda device: 0)
    return library
