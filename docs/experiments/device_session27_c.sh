# Session 27, call C (H100, ~3 min): 1. who freezes what in the search's worker, and each of an
# evaluation's collections with the freeze count it saw (docs/experiments/s27/probe_freeze.py);
# 2. KernelBench 33 (BatchNorm) with the fp16x3 split-K against tf32x3 at 7 / 128 / 1024 rows
# (issue 25, item 2; session 26: 33's fp16x3 0.738x / 0.433x / 0.309x without split-K).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/p /tmp/b
kgen generate --in 8192 --out 8192 -o /tmp/p/main.py > /dev/null 2>&1
(for m in "fp16x3 3" "tf32x3 4"; do set -- $m
   kgen generate .kb/level2/33_Gemm_Scale_BatchNorm.py --math $1 --backend wgmma --tile 128x128x32 --stages $2 --batch 128 -o /tmp/b/33_$1.py --force
   python3 -m kgen.tune.worker build /tmp/b/33_$1.py &
 done; wait) > $OUT/c_prepare.log 2>&1 &
t "probe: freezes and collections"
timeout 120 python3 docs/experiments/s27/probe_freeze.py /tmp/p/main.py 2>&1 | tee $OUT/probe_freeze.log | cut -c1-250
wait
t "33 at 7 / 128 / 1024 rows"
for b in 7 128 1024; do for m in fp16x3 tf32x3; do echo "== 33 $m batch $b"
  timeout 60 kgen bench /tmp/b/33_$m.py --batch $b 2>&1 | grep -E "ModelNew|eager fp32"; done; done | tee $OUT/c_bench33.txt
t done
