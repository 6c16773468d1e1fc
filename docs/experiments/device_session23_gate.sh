# Session 23: the training check (its steps capped; every fp32 run stepping from the fp64 run's
# parameters, a second eager run for every module): the planted faults, the chained GEMMs at 200
# rows (tf32x3 and fp16x3), the reference modules' full validations at odd shapes on the wgmma
# GEMM, TF32 files' training (cuBLAS backward) and Dropout's gradients and training.
. scripts/device_setup.sh
t faults
timeout 200 python3 -m pytest -m gpu -v -rfE --tb=short -n 3 tests/test_faults.py > $OUT/s23_gate_faults.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/s23_gate_faults.log | cut -c1-400 | tail -8
t chained
timeout 120 python3 docs/experiments/s23/validate_chained.py 200 2>&1 | grep -v Warning > $OUT/s23_gate_chained_200.log
grep -E "FAIL|training|: [0-9]+ s" $OUT/s23_gate_chained_200.log | cut -c1-500
t refs
timeout ${REFS_LIMIT:-300} python3 -m pytest -m gpu -v -rfE --tb=short -n 4 tests/test_refs_gpu.py tests/test_cublas_backward_gpu.py tests/test_element_operands.py -k "(test_odd_shape_full_validation and wgmma) or test_training_steps_at_tf32 or dropout_gradients" > $OUT/s23_gate_refs.log 2>&1
grep -E "FAILED|ERROR|passed|failed" $OUT/s23_gate_refs.log | cut -c1-400 | tail -12
t done
