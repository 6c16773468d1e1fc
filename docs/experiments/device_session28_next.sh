# What session 27 left for the next session's device time (~10 min on an H100; its own 30 minutes
# were spent). All CPU-tested only:
# 1. The shape rule and the cost model counting split-K (7604e6f): `kgen search --batch 128` of
#    the main problem should build the 128x128 tiles (fp16x3 and tf32x3) and pick fp16x3 128x128
#    (0.141-0.156 ms measured by kgen bench in session 27); the rule's new picks timed against the
#    old: 256 x 8192 -> 8192 (fp16x3 128x128, w in registers, against tf32x3 128x128), KernelBench
#    66's 128 x 16384 -> 16384 (fp16x3 128x128 against tf32x3 128x128).
# 2. The README's main job once more (the worker's exit and own_heap as an argument: 70e15c2,
#    the review's fixes), cold and rerun.
# 3. The GPU tier of the search's path: tests/test_search_gpu.py, tests/test_faults.py; and
#    tests/test_split_k_gpu.py (SplitK::splits_at, the two GEMMs' split rule made one: b21ee8f, CPU-compiled only).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
mkdir -p /tmp/n
(for b in 256; do for m in "fp16x3 3" "tf32x3 4"; do set -- $m
   kgen generate --problem gemm_scale_bn --batch $b --in 8192 --out 8192 --math $1 --backend wgmma --tile 128x128x32 --stages $2 -o /tmp/n/main_${b}_$1.py --force
 done; done
 for m in "fp16x3 3" "tf32x3 4"; do set -- $m
   kgen generate .kb/level2/66_Matmul_Dropout_Softmax.py --math $1 --backend wgmma --tile 128x128x32 --stages $2 -o /tmp/n/66_$1.py --force
 done
 for f in /tmp/n/*.py; do python3 -m kgen.tune.worker build $f & done; wait) > $OUT/n_prepare.log 2>&1 &
t "main job, cold and rerun"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "^\[|build \[|eval  \[" $OUT/main_job_cold.log | cut -c1-140
wait
t "the rule's new picks against the old (same process each pair)"
for f in main_256_fp16x3 main_256_tf32x3 66_fp16x3 66_tf32x3; do echo "== $f"
  timeout 60 kgen bench /tmp/n/$f.py 2>&1 | grep -E "ModelNew|eager fp32"; done | tee $OUT/n_rule_picks.txt
t "kgen search --batch 128: what the cost model builds"
scratch=$(mktemp -d); (cd $scratch && timeout 200 kgen search --problem gemm_scale_bn --in 8192 --out 8192 --batch 128) > $OUT/n_search_128.log 2>&1
grep -E "candidates to measure|build \[|eval  \[|fastest valid" $OUT/n_search_128.log | cut -c1-160
t "gpu tests"
timeout 420 python3 -m pytest -m gpu -q -rfEx tests/test_split_k_gpu.py tests/test_search_gpu.py tests/test_faults.py > $OUT/n_gpu_tests.log 2>&1
echo "exit $?"; tail -2 $OUT/n_gpu_tests.log | cut -c1-300
t done
