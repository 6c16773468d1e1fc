# Session 53, call C: the rule's files at narrow outputs (fp16x3 at BN = 64, x in registers where
# the tiles fill a quarter of the SMs), as `kgen generate` writes them (ab/c/): kgen's gate
# (`kgen validate`, fp32) on each, their kernels' time beside eager's and cuBLAS's SGEMM file's
# (call B's ab/nar/), and KernelBench's own eval at fp32 and bf16 on four of them (ab/ckb/: a
# classifier head with BatchNorm and softmax over 10, an MLP head to 40 with log_softmax, two
# plain narrow shapes), the fp32 file for both.
source scripts/device_setup.sh
t "builds"
build_files ab/c c_builds.log
t "the gate"
for f in ab/c/*_fp32.py; do (n=$(basename $f .py); timeout 200 python3 -m kgen validate $f > $OUT/c_validate_$n.log 2>&1; echo "$n: exit $? $(grep -ciE 'fail' $OUT/c_validate_$n.log) lines with 'fail'") & done; wait
t "kernels"
for s in 8192_1024_16 16384_256_32 1024_1024_32 8192_1024_64 4096_4096_10 2048_1024_32 1024_4096_10; do b=${s%%_*}; other=""; [ -f ab/nar/${s}_cublas_fp32.py ] && other="ab/nar/${s}_cublas_fp32.py"; S51_AS_EMITTED=1 timeout 50 python3 docs/experiments/s51/w_in_registers_rows.py ab/c/ref_$s.py ab/c/${s}_fp32.py $b $other > $OUT/c_kernels_$s.md 2>&1; echo "$s: $(grep -E '^\| [0-9]+ \| eval' $OUT/c_kernels_$s.md)"; done
t "KernelBench's eval"
for p in fp32 bf16; do timeout 200 python3 scripts/kernelbench_corpus.py --kb .kb --files ab/ckb --precision $p --json $OUT/c_kb_$p.jsonl ab/c/ref_head_softmax.py ab/c/ref_two_layer_head.py ab/c/ref_8192_1024_16.py ab/c/ref_4096_4096_10.py > $OUT/c_kb_$p.log 2>&1; echo "$p:"; tail -8 $OUT/c_kb_$p.log; done
t end
