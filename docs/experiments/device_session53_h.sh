# Session 53, call H: call E's one failure after its mend (a device's name is no hyperparameter):
# the input moved to self.device chosen in __init__, its file as `kgen generate` writes it now:
# kgen's gate, KernelBench's eval at fp32 and bf16.
source scripts/device_setup.sh
build_files ab/hkb h_builds.log
timeout 200 python3 -m kgen validate ab/hkb/ref_device_move.py > $OUT/h_validate.log 2>&1; echo "validate: exit $? $(tail -1 $OUT/h_validate.log)"
for p in fp32 bf16; do timeout 120 python3 scripts/kernelbench_corpus.py --kb .kb --files ab/hkb --precision $p --json $OUT/h_kb_$p.jsonl ab/h/ref_device_move.py > $OUT/h_kb_$p.log 2>&1; echo "$p:"; grep -E "^\| ref|of [0-9]+ correct" $OUT/h_kb_$p.log; done
t end
