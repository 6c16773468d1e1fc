# Session 46, call I: 56's 1e-2 search, which call A's limit cut in its full validation.
source scripts/device_setup.sh
t "search 56"
timeout 280 kgen search $(ls .kb/level2/56_*.py) --tol 1e-2 --math tf32 --math bf16 --math fp16 \
  --out-dir $OUT/i_s56 --results-dir $OUT/i_s56 > $OUT/i_search56.log 2>&1
echo "search exit $?"; grep -E "fastest valid|no candidate" $OUT/i_search56.log | cut -c1-220
t "end"
