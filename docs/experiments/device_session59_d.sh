# Session 59, call D (nvidia-h200): the upcast region computed in fp32 (to_float32 /
# to_module_dtype nodes, Node.fp32: a 16-bit build rounds nothing between them), after call C's
# gate failed one check of upcast_rmsnorm in bf16 (every op of the region rounded to bf16 then).
# kgen validate (full output) and kgen bench of: the three bf16 modules of call C, the same RMSNorm
# without casts (plain_rmsnorm: eager bf16 rounds every op), the review's two (a variance
# E[h^2] - E[h]^2 in bf16; HF's RMSNorm in fp16 on activations above 256), and the fp32 module.
. scripts/device_setup.sh
v=.kgen_work/v59b
files="$v/upcast_*.py $v/plain_rmsnorm.py"
for f in $files; do for d in fp32 bf16 fp16; do
  python3 -c "import sys, torch; from kgen.check.loading import EmittedFile; EmittedFile(sys.argv[1]).build(getattr(torch, sys.argv[2]))" \
    $f $(case $d in fp32) echo float32;; bf16) echo bfloat16;; fp16) echo float16;; esac) > /dev/null 2>&1 &
done; done; wait
t built
for f in $files; do
  for d in $(case $f in *fp32.py) echo fp32 bf16;; *fp16.py) echo fp16;; *) echo bf16 fp16;; esac); do
    echo "== $(basename $f) $d"; timeout 150 kgen validate $f --dtype $d 2>&1 | grep -v "^  "
    timeout 100 kgen bench $f --dtype $d 2>&1 | tail -3
  done
done > $OUT/upcast.log 2>&1
grep -E "^==|FAIL|passed, |speedup|error vs fp64" $OUT/upcast.log | cut -c1-230
t done
