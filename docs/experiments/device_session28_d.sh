# Session 28, call D: the README's main job alone once more (call C's times did not come back),
# and where the post-norm block's bf16 forward goes, kernel by kernel, against eager bf16.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/d
sed -n '/^cat > \/tmp\/b\/postln.py/,/^PY$/p' docs/experiments/device_session28_b.sh | sed '1d;$d' > /tmp/d/postln.py
t "main job, cold and rerun (nothing else running)"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt
grep -E "build \[|eval  \[|record" $OUT/main_job_cold.log | cut -c1-120
rm -f $OUT/generate*.log $OUT/bench_headline_rule.log
t "post-norm block, bf16, kernel by kernel"
(cd /tmp/d && kgen generate postln.py -o postln_new.py --force | tail -1) > $OUT/d_profile_bf16.log 2>&1
python3 scripts/profile_forward.py /tmp/d/postln_new.py --dtype bf16 --eager >> $OUT/d_profile_bf16.log 2>&1
tail -40 $OUT/d_profile_bf16.log | cut -c1-160
t done
