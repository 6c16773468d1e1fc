# Session 58, call D (nvidia-h200-x2): the C++ autograd node as a Node of its own (7575355) and
# probe 58's dtype spellings (d3b7aec) on the GPU, and the three user-style GPU tiers through
# their shared conftest helper (d3e44bb).
# GPU 1: the node's tiers (test_half_gpu.py -k cpp_node: its gradients against the Python node's,
# bit for bit; test_backward_gpu.py: fp32 training through it; the kept z's backward), then the
# node's A/B (docs/experiments/s58/node_ab.py: the files of 7505d78 and of this tree, host time of
# a training-mode forward and a step, gradients bit for bit).
# GPU 0: test_autocast_dtype_gpu.py's spellings and references, then the three user-style tiers.
. scripts/device_setup.sh
ab=.kgen_work/ab58
(
  CUDA_VISIBLE_DEVICES=1 gpu_tests node.log 250 tests/test_half_gpu.py tests/test_backward_gpu.py tests/test_keep_z_gpu.py \
    -k "cpp_node or test_backward_gpu or backward_from_the_kept_z"
  for f in $ab/new/*.py; do
    n=$(basename $f); d=${n%%_*}; ref=$ab/refs/${n#*_}
    CUDA_VISIBLE_DEVICES=1 timeout 90 python3 docs/experiments/s58/node_ab.py $ref $ab/old/$n $f $d 2>&1 | grep -v Warning | tail -4
  done > $OUT/node_ab.log 2>&1
) > $OUT/gpu1.txt 2>&1 &
CUDA_VISIBLE_DEVICES=0 gpu_tests autocast.log 220 tests/test_autocast_dtype_gpu.py -k "test_spellings or test_refs"
CUDA_VISIBLE_DEVICES=0 gpu_tests user_tiers.log 250 tests/test_rows_input_gpu.py tests/test_output_tail_gpu.py tests/test_linear_rounding_gpu.py
wait
cat $OUT/gpu1.txt
grep -E "^[a-z]|NVIDIA" $OUT/node_ab.log
t done
