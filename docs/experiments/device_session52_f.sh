# Session 52, call F: the shape rule below its harmonic (configs.fastest_family: fp16x3 where
# M N / (M + N / 2) >= 224, measured down to 241 in session 51; below, tf32x3 unless M <= 256 rows
# fill the GPU with fp16x3's square tile, w in registers). fp16x3's and tf32x3's files of
# tests/refs/gemm_mul_leakyrelu at eight shapes below 224 (ab/cal/ref_M_K_N.py, `kgen generate
# --math fp16x3 / tf32x3`, each the rule's tile for its math), a forward's kernels in device us
# (s51/w_in_registers_rows.py as emitted: eval and training mode, eager beside them).
source scripts/device_setup.sh
mkdir -p /tmp/cal && cp ab/cal/*_fp32.py /tmp/cal/
t build
build_files /tmp/cal f_builds.log
t "fp16x3 against tf32x3"
for r in ab/cal/ref_*.py; do
  s=${r#ab/cal/ref_}; s=${s%.py}; b=${s%%_*}
  S51_AS_EMITTED=1 timeout 40 python3 docs/experiments/s51/w_in_registers_rows.py $r ab/cal/${s}_fp16x3_fp32.py $b ab/cal/${s}_tf32x3_fp32.py > $OUT/f_cal_$s.md 2>&1
  echo "$s: $(tail -2 $OUT/f_cal_$s.md | tr '\n' ' ')"
done
t end
