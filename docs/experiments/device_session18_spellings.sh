# Session 18: kgen validate (the full gate, fp32) of the files kgen generate writes for six of
# the session's probe modules (docs/experiments/s18/refs/: an Enum / config constructor, a
# comparison made a number, W.permute(1, 0), F.linear(x, W.t()), forward(x, **kwargs), __file__).
. scripts/device_setup.sh
mkdir -p /tmp/s18v
for r in docs/experiments/s18/refs/*.py; do
  kgen generate $r -o /tmp/s18v/$(basename $r) --force > /dev/null || echo "generate failed: $r"
done
t "build"
for f in /tmp/s18v/*.py; do (timeout 200 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
for r in docs/experiments/s18/refs/*.py; do
  n=$(basename $r .py)
  t "validate $n"
  timeout 90 kgen validate /tmp/s18v/$n.py --ref $r > $OUT/validate_$n.log 2>&1; tail -1 $OUT/validate_$n.log
done
t done
