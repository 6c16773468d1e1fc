# 3xTF32 floors on one GPU (logs under $OUT): for three shapes of tests/refs/gemm_mul_leakyrelu.py
# (Linear -> x2 -> LeakyReLU), `kgen search --tol 1e-4 --math tf32x3 --top 2`, then
# `kgen bench --compile` of the winner (eager fp32 and torch.compile in the same run).
# Floor = 3 * 2*M*N*K / 494.7 TFLOP/s: C 0.417 ms, A 1.667 ms, B 1.667 ms.
# Shapes as NAME:BATCH:IN:OUT, ordered C, A, B (cheapest first, in case the time runs out).
SHAPES=${SHAPES:-"C:128:16384:16384 A:2048:8192:8192 B:32768:1024:4096"}
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=. PYTHONUNBUFFERED=1
start=$(date +%s)
t() { echo "--- t=$(( $(date +%s) - start ))s: $*"; }
r=tests/refs/gemm_mul_leakyrelu.py
for s in $SHAPES; do
  IFS=: read -r name b k n <<< "$s"
  t "search $name (b=$b in=$k out=$n)"
  timeout 170 python3 -m kgen.cli search $r --batch $b --in $k --out $n --tol 1e-4 --math tf32x3 --top 2 \
    > $OUT/search_$name.log 2>&1
  echo "search rc=$?"
  grep -E "fastest valid|no candidate|rewrite|FAIL" $OUT/search_$name.log | tail -6
  f=$(ls generated/gemm_mul_leakyrelu_b${b}_i${k}_o${n}_*tol0.0001.py 2>/dev/null | head -1)
  t "bench $name: ${f:-no winner file}"
  if [ -n "$f" ]; then
    timeout 150 python3 -m kgen.cli bench "$f" --compile > $OUT/bench_$name.log 2>&1
    echo "bench rc=$?"
    tail -6 $OUT/bench_$name.log
  fi
done
t done
