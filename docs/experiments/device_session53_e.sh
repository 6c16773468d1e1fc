# Session 53, call E: the front door's changes (b873fe0) on the GPU. Four modules in spellings
# the probe found refused or wrong (ab/e/: a residual written before the GEMM, the input moved to
# a device chosen in __init__, a branch on torch.cuda.is_available(), a parameter times the input
# before the GEMM), their files as `kgen generate` writes them (ab/ekb/): kgen's gate and
# KernelBench's eval at fp32 and bf16; the GPU tier of the input-residual tests; and KernelBench's
# eval at fp32 on nine of its files (every module's first GEMM now goes through the tracer's
# deferral path; 45 runs the 16-quad x split).
source scripts/device_setup.sh
t "builds, tests"
build_files ab/ekb e_builds.log &
gpu_tests e_gpu.log 200 tests/test_input_residual.py
wait
t "the gate"
for f in ab/ekb/*.py; do (n=$(basename $f .py); timeout 200 python3 -m kgen validate $f > $OUT/e_validate_$n.log 2>&1; echo "$n: exit $? $(tail -1 $OUT/e_validate_$n.log)") & done; wait
t "KernelBench's eval on them"
for p in fp32 bf16; do timeout 150 python3 scripts/kernelbench_corpus.py --kb .kb --files ab/ekb --precision $p --json $OUT/e_kb_$p.jsonl ab/e/ref_*.py > $OUT/e_kb_$p.log 2>&1; echo "$p:"; grep -E "^\| ref|of [0-9]+ correct" $OUT/e_kb_$p.log; done
t "KernelBench's files"
NUMS="12 14 18 33 45 55 68 84 97" PRECISIONS=fp32 EVAL_LIMIT=240 bash scripts/device_kernelbench.sh 2>&1 | grep -E "of [0-9]+ correct|incorrect|FAIL|build failed|t=" | head -20
t end
