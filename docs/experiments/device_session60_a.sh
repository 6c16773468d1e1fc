# Session 60, call A (nvidia-h200, one GPU): session 59's call G, not run then - KernelBench's 36
# files respelled (call E's corpus, .kgen_work/kb_respelled) in bf16 after bc77bfe (a bias added by
# an op of its own rounds z first, as eager); call E had 29 of 36, its control 36 of 36. Beside it,
# the GPU tests the rounding change touches (test_linear_rounding_gpu.py, test_half_gpu.py) and
# kgen validate of modules using the probes' later fixes (docs/experiments/s60: stateless modules
# built in forward / a plain list / a Sequential slice with clone + detach_, fp32; an in-place op
# on the upcast value and a parameter's .float(), bf16). Timings in this call are beside GPU tests.
. scripts/device_setup.sh
(gpu_tests rounding.log 200 tests/test_linear_rounding_gpu.py tests/test_half_gpu.py > $OUT/rounding.txt 2>&1
 for m in stateless:fp32 inplace_upcast:bf16; do
   timeout 120 kgen validate .kgen_work/v60/${m%:*}.py --dtype ${m#*:} 2>&1 | grep -v "^  " > $OUT/validate_${m%:*}.log
 done) &
REFS=.kgen_work/kb_respelled PRECISIONS=bf16 GPUS=1 EVAL_LIMIT=330 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | grep -v "| correct |" | tail -14
wait
cat $OUT/rounding.txt; tail -n 4 $OUT/validate_*.log | cut -c1-200
t done
