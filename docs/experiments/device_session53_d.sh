# Session 53, call D: call C's one gate failure, `training, 20 steps` of the rule's file at
# 2048 x 1024 -> 32 (fp16x3 at 64x64, 32 units: x's pass, not x in registers), its weight's and
# bias's change 1.07e-6 / 9.9e-7 from fp64's. Is it the tile, fp16x3, or the check at this shape?
# kgen validate, twice, on: the rule's file (64x64), fp16x3 at 64x128 (the tile session 52's rule
# took here) and at 128x64, tf32x3's rule file.
source scripts/device_setup.sh
t "builds"
build_files ab/d d_builds.log
t "the gate"
for f in ab/d/*_fp32.py; do for r in 1 2; do (n=$(basename $f .py); timeout 200 python3 -m kgen validate $f > $OUT/d_validate_${n}_$r.log 2>&1; echo "$n run $r: exit $? $(grep 'training, 20' $OUT/d_validate_${n}_$r.log | cut -c1-190)") & done; done; wait
t end
