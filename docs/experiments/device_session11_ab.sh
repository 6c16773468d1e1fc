# Session 11, second device call: today's 3xTF32 files against session 8's (1ad950f, whose
# searches measured 33 / 84 at 1.12-1.13 ms and 56 at 0.486x) in one process per module
# (scripts/compare_forward.py); the bf16 forwards kernel by kernel under no_grad, as KernelBench
# times them; a full validation with its build timed apart. Files made before the call into
# s11files/ (untracked, carried with the tree): k<NUM>_{a_old,b_new}.py. Carry .kb (KernelBench).
. scripts/device_setup.sh
files=/tmp/s11_bf16; mkdir -p $files
refs=$(for n in 84 33 97 12; do ls .kb/level2/${n}_*.py; done)
t "build the A/B files and the bf16 files"
for r in $refs; do kgen generate $r --dtype bf16 -o $files/$(basename $r) --force > /dev/null; done
for f in s11files/*.py; do (timeout 400 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done
for f in $files/*.py; do (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
for group in k33 k56 k84; do
  n=${group#k}
  t "compare $group"
  timeout 150 python3 scripts/compare_forward.py $(ls .kb/level2/${n}_*.py) s11files/${group}_*.py 2>&1 | tee $OUT/compare_$group.log | grep -v "eager rounds"
done
t "profile, bf16, under no_grad"
python3 scripts/profile_forward.py --dtype bf16 --eager --iters 20 $files/*.py 2>&1 | grep -v "warn" > $OUT/profile_bf16_nograd.log; cut -c1-130 $OUT/profile_bf16_nograd.log
t "kgen validate of the shipped softmax file"
kgen validate generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py > $OUT/validate_softmax_timed.log 2>&1; sed -n '2p;$p' $OUT/validate_softmax_timed.log
t done
