# Session 52, call B: call A's last step, its script mended (session 51's _KGEN_W_SPLITS entries
# are tuples): a training forward where w changes before every call, trusted and not.
source scripts/device_setup.sh
t build
mkdir -p /tmp/b && cp ab/kb12_fp32.py ab/kb55_fp32.py ab/kb39_fp32.py /tmp/b/
build_files /tmp/b b_builds.log
t "kernels, w changed before every forward"
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/55_*.py ab/kb55_fp32.py ab/kb55_trusted_fp32.py 128 256 > $OUT/b_changed_kb55.md 2>&1; tail -4 $OUT/b_changed_kb55.md
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/12_*.py ab/kb12_fp32.py ab/kb12_trusted_fp32.py 128 256 1024 > $OUT/b_changed_kb12.md 2>&1; tail -5 $OUT/b_changed_kb12.md
timeout 60 python3 docs/experiments/s52/changed_w_trusted.py .kb/level2/39_*.py ab/kb39_fp32.py ab/kb39_trusted_fp32.py 256 16384 > $OUT/b_changed_kb39.md 2>&1; tail -4 $OUT/b_changed_kb39.md
t end
