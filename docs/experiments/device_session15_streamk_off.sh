. scripts/device_setup.sh
for f in s15files/*.py; do (timeout 400 python3 -m kgen.tune.worker build $f > /tmp/b_$(basename $f).log 2>&1 || tail -20 /tmp/b_$(basename $f).log) & done; wait
timeout 200 python3 scripts/compare_forward.py .kb/level2/56_Matmul_Sigmoid_Sum.py s15files/k56_base.py s15files/k56_sk.py s15files/k56_skoff.py 2>&1 | tee $OUT/compare_56_skoff.log
