set -x
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv
for f in generated/*.py; do
  tol=$(echo $f | sed 's/.*_tol\(.*\)\.py/\1/')
  echo "=== $f tol $tol"
  timeout 300 python3 -m kgen.cli validate $f --tol $tol
done > $OUT/winners.log 2>&1
timeout 400 python3 -m pytest -m gpu -v tests/test_faults.py > $OUT/faults.log 2>&1
tail -5 $OUT/faults.log
grep -h "passed,\|===" $OUT/winners.log
