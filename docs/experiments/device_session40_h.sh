# Session 40, call H: `kgen bench --training` reports a step's peak GPU memory beside eager's; its
# GPU tests (a bf16 file's peak within 2x eager's + 64 MiB) and the report of KernelBench 12 in bf16.
# Run as: timeout 200 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "bench --training"
gpu_tests t_bench_training.log 150 tests/test_bench_training_gpu.py
python3 -m kgen.cli generate .kb/level2/12_*.py --dtype bf16 -o /tmp/k12.py --force | tail -1
timeout 40 python3 -m kgen.cli bench /tmp/k12.py --training --dtype bf16 > $OUT/train_k12_bf16.log 2>&1; echo "exit $?"; cat $OUT/train_k12_bf16.log | cut -c1-200
t done
