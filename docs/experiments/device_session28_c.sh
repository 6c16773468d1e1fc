# Session 28, call C: the README's main job alone (cold, rerun: call A's cold run had builds beside
# it); the post-norm block in bf16 and fp16 (kgen validate --dtype, kgen bench --dtype); HF GPT-2's
# MLP written with its Conv1D (now traced); the files of modules whose output carries no gradient
# (fe6df62: ModelNew's output carries none, the gate says so).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
S=docs/experiments/s28
mkdir -p /tmp/c
cp $S/gpt2_mlp.py $S/no_gradient.py $S/no_grad_forward.py /tmp/c/
sed -n '/^cat > \/tmp\/b\/postln.py/,/^PY$/p' docs/experiments/device_session28_b.sh | sed '1d;$d' > /tmp/c/postln.py
t "main job, cold and rerun (nothing else running)"
OUT=$OUT bash scripts/time_main_job.sh > /dev/null 2>&1
cat $OUT/main_job_times.txt; grep -E "ModelNew|eager fp32" $OUT/bench_headline.log
t "generate and build the other files (16 jobs at a time)"
(cd /tmp/c && for f in postln gpt2_mlp no_gradient no_grad_forward; do kgen generate $f.py -o ${f}_new.py --force | tail -1; done
 for f in /tmp/c/*_new.py; do python3 -m kgen.tune.worker build $f & done; wait) > $OUT/c_build.log 2>&1
t "post-norm block in bf16 and fp16"
(cd /tmp/c && for d in bf16 fp16; do timeout 60 kgen bench postln_new.py --dtype $d; timeout 120 kgen validate postln_new.py --dtype $d; done) > $OUT/c_postln_half.log 2>&1
grep -E "ModelNew  |eager|passed|FAIL" $OUT/c_postln_half.log | cut -c1-200
t "GPT-2 MLP (Conv1D)"
(cd /tmp/c && timeout 60 kgen bench gpt2_mlp_new.py && timeout 150 kgen validate gpt2_mlp_new.py) > $OUT/c_gpt2.log 2>&1
grep -E "ModelNew  |eager|passed|FAIL|eval mode|gradients" $OUT/c_gpt2.log | cut -c1-200
t "outputs without gradient"
(cd /tmp/c && for f in no_gradient no_grad_forward; do timeout 120 kgen validate ${f}_new.py; done) > $OUT/c_no_gradient.log 2>&1
grep -E "passed|FAIL|gradients|training" $OUT/c_no_gradient.log | cut -c1-220
t done
