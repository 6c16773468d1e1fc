# Session 59, call C (nvidia-h200): 16-bit modules' upcasts cast back (ca4eb56, 914afc1) on the
# GPU: kgen validate (the full gate, KernelBench's replay at its precision) and kgen bench of
# bf16-built modules that upcast for a softmax, an RMSNorm, a LayerNorm + GELU
# (docs/experiments/s59/upcast_*_ref.py; their files `kgen generate REF` at this commit), in bf16
# and fp16, and of an fp32 module with the same cast, in fp32 and bf16 (its file ran fp32 only).
. scripts/device_setup.sh
v=.kgen_work/v59b
for f in $v/upcast_*.py; do for d in fp32 bf16 fp16; do
  python3 -c "import sys, torch; from kgen.check.loading import EmittedFile; EmittedFile(sys.argv[1]).build(getattr(torch, sys.argv[2]))" \
    $f $(case $d in fp32) echo float32;; bf16) echo bfloat16;; fp16) echo float16;; esac) > /dev/null 2>&1 &
done; done; wait
t built
for f in $v/upcast_*.py; do
  for d in $(case $f in *fp32*) echo fp32 bf16;; *) echo bf16 fp16;; esac); do
    echo "== $(basename $f) $d"; timeout 150 kgen validate $f --dtype $d 2>&1 | tail -5
    timeout 100 kgen bench $f --dtype $d 2>&1 | tail -3
  done
done 2>&1 | tee $OUT/upcast.log | grep -E "^==|FAIL|passed|eager" | cut -c1-220
t done
