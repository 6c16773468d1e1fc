# Session 12: fusion 0 (the point-wise chain after the Linear's output in a kernel of its own, at
# full occupancy, instead of in the GEMM's epilogue, which runs on the consumer warps after the
# mainloop). KernelBench's modules with such a chain calling exp / log / erf / tanh
# (lower.forward.chain_math_calls): files at fusion 1 (s12files/z<NUM>_a_f1.py) and fusion 0
# (z<NUM>_b_f0.py), interleaved with eager in fp32 and in bf16 (scripts/compare_forward.py); then
# the full gate (`kgen validate`, gradients included) of 29's fusion-0 file in fp32 and bf16.
# Carry .kb.
. scripts/device_setup.sh
for f in s12files/z*.py; do
  (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f bf16") &
  (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f fp32") &
done; wait
for dtype in fp32 bf16; do for n in ${NUMS:-29 45 53 59 70 81 86 95}; do
  t "fusion 1 vs 0, $n $dtype"
  timeout 80 python3 scripts/compare_forward.py $(ls .kb/level2/${n}_*.py) s12files/z${n}_a_f1.py s12files/z${n}_b_f0.py --dtype $dtype 2>&1 | tee -a $OUT/fusion0_$dtype.log | cut -c1-100 | head -3
done; done
for dtype in fp32 bf16; do
  t "kgen validate 29 fusion 0 $dtype"
  timeout 120 python3 -m kgen validate s12files/z29_b_f0.py --ref $(ls .kb/level2/29_*.py) --dtype $dtype 2>&1 | tee -a $OUT/fusion0_validate_29.log | tail -3
done
t done
