# Issue 25, item 2, at today's code (fp16x3 wins at every KernelBench shape since session 21;
# session 7 measured this on tf32x3: 30 0.367 / 0.395 / 0.429x, 99 0.384 / 0.415 / 0.452x, 33
# 0.397 / 0.406 / 0.439x eager fp32 at 128 / 1024 / 16384 rows): KernelBench's GroupNorm (30),
# BatchNorm (33) and softmax (99) modules searched at 1024 rows for 128 and 16384 too (the
# winner fully validated at each), then the winner timed at 7 and 2051 rows against eager fp32
# (`kgen bench --batch`, one process per batch). One H100 call, ~8 min; NUMS to choose.
. scripts/device_setup.sh
for n in ${NUMS:-30 33 99}; do
  f=$(ls .kb/level2/${n}_*.py)
  t "search $f at 1024 (+128, 16384)"
  timeout ${KB_LIMIT:-200} python3 -m kgen.cli search $f --also-batch 128 --also-batch 16384 --tol 1e-4 \
    --out-dir /tmp/ab/generated --results-dir /tmp/ab/results > $OUT/s25_batches_kb$n.log 2>&1; echo "exit $?"
  grep -vE "^  (build|eval) " $OUT/s25_batches_kb$n.log | grep -E "batch|fastest valid|no candidate" | cut -c1-260 | tail -8
  w=$(ls /tmp/ab/generated/${n}_*_tol0.0001.py 2>/dev/null | head -1)
  for b in 7 2051; do
    [ -n "$w" ] && timeout 120 python3 -m kgen.cli bench $w --batch $b --iters 100 2>&1 | tail -3 | sed "s/^/  batch $b: /"
  done
done
t done
