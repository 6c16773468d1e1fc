# Session 54, call G: s54/zero_rows.py on Linear -> F.normalize with a padded batch's zero rows.
source scripts/device_setup.sh
mkdir -p $OUT
build_files ab/f6 builds.log
python3 docs/experiments/s54/zero_rows.py ab/f6/normalize_pad_fp32.py 2>&1 | tee $OUT/zero_rows.log | tail -3
