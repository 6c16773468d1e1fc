# Session 27, call E (H100, ~3 min): 1. the main job's rerun, where its time goes
# (docs/experiments/s27/rerun_profile.sh); 2. KernelBench 30 (GroupNorm) at 7 / 128 / 2051 rows
# on the file kgen generate gives (issue 25, item 2: session 26 measured it at 128 / 1024 / 16384 only).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
python3 -m compileall -q -j 16 /opt/torch/.venv/lib/python3.12/site-packages > /dev/null 2>&1
mkdir -p /tmp/b
(kgen generate .kb/level2/30_Gemm_GroupNorm_Hardtanh.py -o /tmp/b/30.py --force && python3 -m kgen.tune.worker build /tmp/b/30.py) > $OUT/e_prepare30.log 2>&1 &
t "rerun profile"
bash docs/experiments/s27/rerun_profile.sh 2>&1 | tee $OUT/rerun_profile.log | cut -c1-180
wait
t "30 at 7 / 128 / 2051 rows"
head -3 $OUT/e_prepare30.log | cut -c1-200
for b in 7 128 2051; do echo "== 30 batch $b"; timeout 60 kgen bench /tmp/b/30.py --batch $b 2>&1 | grep -E "ModelNew|eager fp32"; done | tee $OUT/e_bench30.txt
t done
