# Session 22: the fp16x3 gate test that failed with w in registers (two chained GEMMs at 200 rows),
# its whole output; then `kgen validate` of KernelBench 56's fp16x3 file (w in registers at 128
# rows; its training check had run out of the H100's memory in the search). Needs .kb carried.
. scripts/device_setup.sh
t "test"
timeout 150 python3 -m pytest -q -m gpu tests/test_fp16x3.py -k "${K:-gemm_sigmoid_gemm_lse-200}" -x 2>&1 | tail -${LINES_SHOWN:-40} | cut -c1-400
t "validate 56"
kgen generate .kb/level2/56_Matmul_Sigmoid_Sum.py --math fp16x3 -o /tmp/k56.py --force > /dev/null
timeout 200 kgen validate /tmp/k56.py --ref .kb/level2/56_Matmul_Sigmoid_Sum.py 2>&1 | tail -25 | cut -c1-300
t done
