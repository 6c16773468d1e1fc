# Session 11, one device call: where a bf16 module's forward goes, kernel by kernel, against
# eager bf16 (issue 24), then issue 22's planted-fault GPU tests and a full validation's time at
# this commit. Needs .kb/ carried (cp -r ../shared/kernelbench .kb). Logs under $OUT.
. scripts/device_setup.sh
files=/tmp/s11_bf16; mkdir -p $files
refs=$(for n in ${NUMS:-84 33 30 97 12}; do ls .kb/level2/${n}_*.py; done)
t "generate (bf16) and build"
for r in $refs; do kgen generate $r --dtype bf16 -o $files/$(basename $r) --force | grep "^chose" | cut -c1-160; done
for r in $refs; do (python3 -m kgen.tune.worker build --dtype bf16 $files/$(basename $r) > /dev/null 2>&1 || echo "build failed: $r") & done; wait
t "profile, bf16, kgen and eager"
python3 scripts/profile_forward.py --dtype bf16 --eager --iters 20 $files/*.py > $OUT/profile_bf16.log 2>&1; cat $OUT/profile_bf16.log | cut -c1-140
t "tests/test_faults.py"
timeout 300 python3 -m pytest -m gpu -q tests/test_faults.py > $OUT/test_faults.log 2>&1; tail -3 $OUT/test_faults.log
t "full validation of the shipped 1024x8192->8192 softmax file"
/usr/bin/time -f "%e s wall" kgen validate generated/gemm_bn_scale_softmax_b1024_i8192_o8192_tol0.0001.py > $OUT/validate_softmax.log 2>&1; tail -4 $OUT/validate_softmax.log
t done
