# Session 44, call E: `kgen search` in the 1e-2 tier (tf32 and bf16 candidates) after the probe
# rounds the gate's torch.randn input too: KernelBench 12 (bf16 misses 1e-2 on torch.randn: dropped
# by the probe now), 84 and 76 (bf16's rounding small enough: kgen's wgmma bf16 against cuBLAS).
source scripts/device_setup.sh
for n in 12 84 76; do
  t "search $n"
  timeout 95 kgen search $(ls .kb/level2/${n}_*.py) --tol 1e-2 --math tf32 --math bf16 \
    --out-dir $OUT/e_search$n --results-dir $OUT/e_search$n > $OUT/e_search$n.log 2>&1
  echo "search exit $?"; grep -E "probe|passed|failed|fastest valid|dropped" $OUT/e_search$n.log | cut -c1-170 | head -14
done
t "end"
