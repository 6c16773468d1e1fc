# Session 35, call F (fab9530 and after): the rewrite's 16-bit GPU tests with the new
# torch.compile / CUDA graph one; the 16-bit tier's tail module (a broadcast tail now rounding each
# op); the full gate in bf16 and fp16 on a module whose tail has three ops, on both 16-bit
# families (the matrix-vector rewrite and the wgmma GEMM).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t gemv 16-bit GPU tests
gpu_tests gemv.log 150 tests/test_gemv_half.py
t "the 16-bit tier's tail module"
KGEN_TEST_REFS=groupnorm_min_bias gpu_tests tail.log 120 tests/test_half_gpu.py -k "forward_and_buffers or output_written or full_gate"
t "a three-op tail: the full gate in bf16 and fp16, both families"
python3 - <<'PY'
import sys; sys.path.insert(0, "tests"); import test_gemv_half as t
src = t.RESIDUAL_MEAN.replace("return F.gelu(y) + residual", "return torch.sigmoid(F.gelu(y) + residual) * residual")
open("/tmp/tail3.py", "w").write(src)
PY
python3 -m kgen.cli generate /tmp/tail3.py --backend gemv --set batch=257 --set features_in=528 --set features_out=296 -o /tmp/tail3_gemv.py --force | tail -1
python3 -m kgen.cli generate /tmp/tail3.py --backend wgmma --set batch=257 --set features_in=528 --set features_out=296 -o /tmp/tail3_wgmma.py --force | tail -1
for f in gemv wgmma; do for d in bf16 fp16; do
  python3 -m kgen.cli validate /tmp/tail3_$f.py --dtype $d > $OUT/tail3_${f}_$d.log 2>&1
  echo "$f $d: $(tail -1 $OUT/tail3_${f}_$d.log)"; grep FAIL $OUT/tail3_${f}_$d.log | cut -c1-250
done; done
t done
cd $OUT && tar cf /tmp/f.tar * && rm -f * && mv /tmp/f.tar $OUT/f.tar
