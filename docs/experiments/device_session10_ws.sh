# Session 10, issue 25 item 1: where the tf32x3 mainloop's idle tensor time goes. Generates
# KernelBench 33's and 56's default files, writes the variants of
# docs/experiments/s10/ws_variants.py, builds them all at once, prints each one's ptxas report of
# the GEMM kernel, then times them interleaved against eager (scripts/compare_forward.py).
# Carry .kb (KernelBench). VARIANTS overrides the list; NUMS the files (default "33 56").
. scripts/device_setup.sh
mkdir -p /tmp/v
for n in ${NUMS:-33 56}; do
  ref=$(ls .kb/level2/${n}_*.py)
  python3 -m kgen.cli generate $ref -o /tmp/v/k$n.py --force | grep -E "^chose|^wrote"
  python3 docs/experiments/s10/ws_variants.py /tmp/v/k$n.py /tmp/v/out ${VARIANTS:-} > /dev/null
done
t "build $(ls /tmp/v/out | wc -l) files"
for f in /tmp/v/out/*.py; do
  (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/build_$(basename $f .py).log 2>&1 || { echo "build failed: $f"; tail -20 /tmp/build_$(basename $f .py).log; }) &
done; wait
t "built"
for n in ${NUMS:-33 56}; do
  ref=$(ls .kb/level2/${n}_*.py)
  t "compare $n"
  timeout ${COMPARE_LIMIT:-200} python3 scripts/compare_forward.py $ref $(ls /tmp/v/out/k${n}_*.py) 2>&1 | tee $OUT/compare_$n.log
done
t done
