# Session 52, call G: the shape rule below its harmonic (configs.fastest_family: fp16x3 where
# M N / (M + N / 2) >= 224, measured down to 241 in session 51; below, tf32x3 unless M <= 256 rows
# fill the GPU with fp16x3's square tile, w in registers). fp16x3's and tf32x3's files of
# tests/refs/gemm_mul_leakyrelu at eight more shapes below 224 (call F: fp16x3 ahead at seven of eight, down to 63; here smaller and narrower ones) (ab/cal2/ref_M_K_N.py, `kgen generate
# --math fp16x3 / tf32x3`, each the rule's tile for its math), a forward's kernels in device us
# (s51/w_in_registers_rows.py as emitted: eval and training mode, eager beside them).
source scripts/device_setup.sh
mkdir -p /tmp/cal2 && cp ab/cal2/*_fp32.py /tmp/cal2/
t build
build_files /tmp/cal2 g_builds.log
t "fp16x3 against tf32x3"
for r in ab/cal2/ref_*.py; do
  s=${r#ab/cal2/ref_}; s=${s%.py}; b=${s%%_*}
  S51_AS_EMITTED=1 timeout 40 python3 docs/experiments/s51/w_in_registers_rows.py $r ab/cal2/${s}_fp16x3_fp32.py $b ab/cal2/${s}_tf32x3_fp32.py > $OUT/g_cal_$s.md 2>&1
  echo "$s: $(tail -2 $OUT/g_cal_$s.md | tr '\n' ' ')"
done
t end
