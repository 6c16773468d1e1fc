# Session 14: the full gate (fp32) on files of 27 of this session's one-op probe modules
# (composite activations, new ops, row statistics, views, masked_fill, F.batch_norm, pooling by
# hand...), generated at 256x512->1024 with --set (s14probe/, not kept: the modules are
# tests/conftest.module_source with the bodies of tests/test_spellings_ops.py's new entries).
. scripts/device_setup.sh
for f in $(ls s14probe/*.py | grep -v /ref_); do
  (timeout 300 python3 -m kgen.tune.worker build $f > /dev/null 2>&1 || echo "build failed: $f") &
done
wait
t "validate"
for f in $(ls s14probe/*.py | grep -v /ref_); do
  r=$(timeout 120 python3 -m kgen validate $f 2>&1 | tail -25)
  echo "$(basename $f): $(echo "$r" | tail -1)"
  echo "$r" | grep -E "^FAIL|Error" | cut -c1-300
done
t done
