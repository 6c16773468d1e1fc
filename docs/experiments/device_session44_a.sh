# Session 44, call A: kgen's wgmma GEMM on bf16 products of fp32 operands (math bf16 on --backend
# wgmma, kernels/gemm_wgmma_bf16.cuh), first run: KernelBench files at the 1e-2 tier against eager
# fp32 / TF32 / bf16 autocast and kgen's tf32 and cuBLAS TF32 files (s44/relaxed_ab.py), then its
# GPU tests.
source scripts/device_setup.sh
t "generate"
mkdir -p /tmp/f
python3 - <<'PY'
from pathlib import Path
from click.testing import CliRunner
from kgen.cli import main
refs = {n: next(Path(".kb/level2").glob(f"{n}_*.py")) for n in (12, 33, 84, 39, 97, 30, 76)}
jobs = [(n, "wgbf16", ["--backend", "wgmma", "--math", "bf16"]) for n in refs]
jobs += [(n, "wgtf32", ["--backend", "wgmma", "--math", "tf32"]) for n in (12, 39, 33)]
jobs += [(n, "cutf32", ["--backend", "cublas", "--math", "tf32"]) for n in (12, 39)]
for n, tag, args in jobs:
    r = CliRunner().invoke(main, ["generate", str(refs[n]), *args, "-o", f"/tmp/f/kb{n}_fp32_{tag}.py", "--force"])
    if r.exit_code:
        print(n, tag, r.output[-300:])
PY
t "build"
build_files /tmp/f a_build.log
t "A/B"
for n in 12 39 33 84 97 30 76; do
  ref=$(ls .kb/level2/${n}_*.py)
  timeout 60 python3 docs/experiments/s44/relaxed_ab.py $ref $(ls /tmp/f/kb${n}_fp32_*.py) > $OUT/a_ab_kb$n.log 2>&1
  cat $OUT/a_ab_kb$n.log | cut -c1-120
done
t "tests"
gpu_tests a_gpu_wgmma_bf16.log 240 tests/test_wgmma_bf16_gpu.py
t "end"
