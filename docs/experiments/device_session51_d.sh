# Session 51, call D: the rule's harmonic with w's split kept (configs.fastest_family: fp16x3 where
# M N / (M + N / 2) >= 384, was M N / (M + N) >= 512). fp16x3's and tf32x3's files of
# tests/refs/gemm_mul_leakyrelu at six shapes around the threshold (ab/cal/, each file as emitted:
# the rule's tile for its math), a forward's kernels in device us.
source scripts/device_setup.sh
mkdir -p /tmp/cal && cp ab/cal/*_fp32.py /tmp/cal/
t build
build_files /tmp/cal d_builds.log
t "fp16x3 against tf32x3"
for r in ab/cal/ref_*.py; do
  s=${r#ab/cal/ref_}; s=${s%.py}; b=${s%%_*}
  S51_AS_EMITTED=1 timeout 40 python3 docs/experiments/s51/w_in_registers_rows.py $r ab/cal/${s}_fp16x3_fp32.py $b ab/cal/${s}_tf32x3_fp32.py > $OUT/d_cal_$s.md 2>&1
  echo "$s: $(tail -2 $OUT/d_cal_$s.md | tr '\n' ' ')"
done
t end
