# Session 45, calls C and D: `kgen search --tol 1e-2` of KernelBench's 36 level-2 GEMM files with
# the tf32, bf16 and fp16 candidates (kgen's wgmma GEMMs and cuBLAS's), in two halves:
#   bash docs/experiments/device_session45_family.sh c 1 18    (files 1-18 of the sorted list)
#   bash docs/experiments/device_session45_family.sh d 19 36 '66_|68_'
# (the optional fourth argument: files left out, a grep -E pattern: call D left out the two files of
# 128 rows, whose searches took 80-135 s each in call C, for the device time left). Each file's
# search record and winner under $OUT/<call>_family/ (the winners' .py dropped after).
source scripts/device_setup.sh
call=$1; first=$2; last=$3
files=$(ls .kb/level2/*.py | sort -V | sed -n "${first},${last}p" | grep -vE "${4:-^$}")
t "search files $first-$last"
timeout 540 kgen search $files --tol 1e-2 --math tf32 --math bf16 --math fp16 \
  --out-dir $OUT/${call}_family --results-dir $OUT/${call}_family > $OUT/${call}_family.log 2>&1
echo "search exit $?"
grep -E "fastest valid|no candidate|failed" $OUT/${call}_family.log | cut -c1-220
t "end"
