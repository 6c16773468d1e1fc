# Session 52, call E: inputs the module flattens into its first GEMM's features before it
# (x.view(x.size(0), -1), flatten(1), nn.Flatten: Reference.feature_dims). Their GPU tests
# (tests/test_rows_input_gpu.py: the gate in fp32 and bf16 on the rows, ModelNew on the input as
# get_inputs() gives it, forward and dx), then KernelBench's own eval at fp32 and bf16 on three
# such modules (ab/refs/: the files of docs/experiments/s52/refs/), each `kgen generate`'s file.
source scripts/device_setup.sh
t "generate and build (in the background), tests"
for p in fp32 bf16; do
  mkdir -p /tmp/e_$p
  for f in ab/refs/*.py; do kgen generate $f --dtype $p -o /tmp/e_$p/$(basename $f) --force 2>&1 | grep -E "^wrote|kgen:" | cut -c1-160; done
done
(for p in fp32 bf16; do for f in /tmp/e_$p/*.py; do timeout 300 python3 -m kgen.tune.worker build --dtype $p $f > /dev/null 2>&1 || echo "build failed: $f" & done; done; wait) > $OUT/e_builds.log 2>&1 &
gpu_tests e_gpu_rows.log 300 tests/test_rows_input_gpu.py
wait; cat $OUT/e_builds.log
for p in fp32 bf16; do
  t "KernelBench's eval at $p"
  timeout 150 python3 scripts/kernelbench_corpus.py --kb .kb --files /tmp/e_$p --precision $p --json $OUT/e_kb_$p.jsonl ab/refs/*.py > $OUT/e_kb_$p.log 2>&1
  grep -E "^\||correct under" $OUT/e_kb_$p.log
done
t end
