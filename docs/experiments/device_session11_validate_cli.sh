# Session 11, fifth device call: `kgen validate` after it builds the extension before its checks:
# the out-of-bounds fault's test (one FAIL line, the rest "not run" in the last line, no
# traceback), the quick tier's timing line, and a file whose CUDA does not compile (a clear
# error, exit 1, no traceback).
. scripts/device_setup.sh
t "test_faults: out of bounds"
timeout 200 python3 -m pytest -m gpu -q tests/test_faults.py -k out_of_bounds 2>&1 | tail -2
t "kgen validate --quick"
kgen validate generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py --quick 2>&1 | sed -n '2p;$p'
t "a file that does not compile"
python3 - <<'PY'
src = open("generated/gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py").read()
assert "namespace kgen {" in src
open("/tmp/broken.py", "w").write(src.replace("namespace kgen {", "namespace kgen { this_is_not_cuda;", 1))
PY
kgen validate /tmp/broken.py --ref kgen/refs/gemm_scale_bn.py > $OUT/broken.log 2>&1; echo "exit $?"; grep -c Traceback $OUT/broken.log; head -c 600 $OUT/broken.log; echo; tail -c 400 $OUT/broken.log
t done
