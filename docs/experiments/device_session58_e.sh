# Session 58, call E: kgen validate (the full gate) in fp32 and bf16 on two user-style modules
# built of spellings probe 58 took (docs/experiments/s58/{epilogue,dtype}_ref.py: a filled
# operand broadcast, .item() of a parameter, adaptive pooling, torch.absolute; casts to another
# value's dtype, full_like in the module's dtype). The files: `kgen generate REF` at 0833577.
. scripts/device_setup.sh
v=.kgen_work/ab58/v
for f in $v/*.py; do for d in fp32 bf16; do
  python3 -c "import sys, torch; from kgen.check.loading import EmittedFile; EmittedFile(sys.argv[1]).build(getattr(torch, sys.argv[2]))" $f $([ $d = fp32 ] && echo float32 || echo bfloat16) &
done; done; wait
t built
for f in $v/*.py; do for d in fp32 bf16; do
  echo "== $(basename $f) $d"; timeout 100 kgen validate $f --dtype $d 2>&1 | tail -4
done; done 2>&1 | tee $OUT/validate.log
t done
