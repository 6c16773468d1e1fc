# Session 38, call A: the GPU run of session 37's commits made after its device time was spent
# (f9df8f9: the fp64 judge's Dropout masks; 8d8faf7: the 16-bit backward's autocast guard;
# f736781: the gate's g rounded to the module's dtype, frozen parameters; 9427d67: bench through
# validate's Trio). docs/experiments/device_session38_next.sh, step 0.
# Run as: timeout 560 bash THIS; cd $OUT && tar cf /tmp/a.tar * && find . -mindepth 1 -delete && mv /tmp/a.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/f
python3 -m kgen.cli generate .kb/level2/66_*.py -o /tmp/f/k66_fp32.py --force | tail -1
python3 -m kgen.cli generate .kb/level2/66_*.py --dtype bf16 -o /tmp/f/k66_bf16.py --force | tail -1
python3 -m kgen.cli generate .kb/level2/33_*.py --dtype bf16 -o /tmp/f/k33_bf16.py --force | tail -1
build_files /tmp/f builds.log
t "validate 66"
timeout 120 python3 -m kgen.cli validate /tmp/f/k66_fp32.py --dtype fp32 > $OUT/validate_66_fp32.log 2>&1; echo "66 fp32 exit $?"; tail -4 $OUT/validate_66_fp32.log
timeout 120 python3 -m kgen.cli validate /tmp/f/k66_bf16.py --dtype bf16 > $OUT/validate_66_bf16.log 2>&1; echo "66 bf16 exit $?"; tail -4 $OUT/validate_66_bf16.log
t "bench --training 66, 33"
for f in k66_fp32:fp32 k66_bf16:bf16 k33_bf16:bf16; do timeout 60 python3 -m kgen.cli bench /tmp/f/${f%%:*}.py --training --dtype ${f##*:} > $OUT/train_${f%%:*}.log 2>&1
  echo "${f}: exit $?"; grep -vE '^\s*$' $OUT/train_${f%%:*}.log | tail -8; done
t tests
gpu_tests t_bench_training.log 120 tests/test_bench_training_gpu.py
gpu_tests t_dropout.log 80 tests/test_refs_gpu.py -k dropout
gpu_tests t_e66.log 80 tests/test_element_operands.py -k 66
gpu_tests t_half.log 150 tests/test_half_gpu.py -k "backward or gradients"
gpu_tests t_custom_ops.log 120 tests/test_custom_ops.py
gpu_tests t_backward.log 100 tests/test_backward_gpu.py -k "groupnorm or softmax"
t done
