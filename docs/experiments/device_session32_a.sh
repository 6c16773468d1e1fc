# Session 32, call A: the GPU tests session 31 wrote and could not run (its closing note, "Not run
# on a GPU"): the corrected odd-width test, the 16-bit K padding, the (..., in_features) inputs.
# Three pytest processes side by side (the builds are CPU-bound; torch's extension lock keeps a
# shared build from being made twice).
. scripts/device_setup.sh
t "gpu tests, three groups at once"
KGEN_TEST_REFS=swish_scale,mul_leakyrelu gpu_tests gpu_odd_width.log 500 tests/test_refs_gpu.py -k odd_width > $OUT/sum_odd.txt &
gpu_tests gpu_padding.log 500 tests/test_half_gpu.py::test_in_features_that_are_no_multiple_of_8 tests/test_constant_gpu.py > $OUT/sum_pad.txt &
gpu_tests gpu_rows.log 500 tests/test_rows_input_gpu.py > $OUT/sum_rows.txt &
wait
t done
for f in $OUT/sum_*.txt; do echo "== $f"; cat $f; done
