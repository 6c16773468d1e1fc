# Session 9 (H100): where a candidate's build time goes, and the README's main job cold and rerun
# (issue 25, item 3). Logs under $OUT.
. scripts/device_setup.sh >/dev/null
W=/tmp/s9b; rm -rf $W; mkdir -p $W
nproc
t "python startup"
/usr/bin/time -f "import torch: %e s" python3 -c "import torch" 2>&1
/usr/bin/time -f "import torch + CUDA init: %e s" python3 -c "import torch; torch.cuda.init(); torch.cuda.get_device_capability()" 2>&1
/usr/bin/time -f "import kgen.cli: %e s" python3 -c "import kgen.cli" 2>&1
t "one file's build, by phase"
python3 -m kgen.cli generate --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 -o $W/f.py > /dev/null
python3 - $W/f.py $W/k.cu <<'PY'
import re, sys
src = open(sys.argv[1]).read()
m = re.search(r"_CUDA_SOURCE = r?'''(.*?)'''", src, re.S) or re.search(r'_CUDA_SOURCE = r?"""(.*?)"""', src, re.S)
open(sys.argv[2], "w").write(m.group(1))
PY
/usr/bin/time -f "nvcc alone: %e s" nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
  -c $W/k.cu -o $W/k.o --time $W/nvcc_phases.csv 2>&1
cut -d, -f2,7 $W/nvcc_phases.csv
TORCH_EXTENSIONS_DIR=$W/ext1 /usr/bin/time -f "kgen.tune.worker build (one, alone): %e s" python3 -m kgen.tune.worker build $W/f.py 2>&1 | tail -2
grep -E "^cuda_flags|^cuda_post_cflags|^cflags|^post_cflags|^ldflags" $W/ext1/*/build.ninja | cut -c1-400
t "six builds at once (the main job's candidates)"
for tile in "128x128x32 --warp 16x128 --stages 4" "128x128x32 --warp 16x128 --stages 3" "64x128x32 --warp 16x128 --stages 4" \
            "128x64x32 --warp 16x64 --stages 6" "64x64x32 --warp 16x64 --stages 6" "64x128x32 --warp 16x128 --stages 3"; do
  n=$((${n:-0} + 1))
  python3 -m kgen.cli generate --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 --backend wgmma --math tf32x3 \
    --fusion 2 --tile $tile --group 8 -o $W/six_$n.py > /dev/null 2>&1 || echo "generate $tile failed"
done
ls $W/six_*.py | wc -l
s0=$(date +%s.%N)
for f in $W/six_*.py; do
  ( TORCH_EXTENSIONS_DIR=$W/ext6 MAX_JOBS=2 /usr/bin/time -f "$(basename $f): %e s" python3 -m kgen.tune.worker build $f 2>&1 | tail -1 ) &
done
wait
python3 -c "import time; print(f'six at once: {time.time() - $s0:.1f} s')"
t "the README's main job, empty caches"
export KGEN_CACHE_DIR=$W/kc TORCH_EXTENSIONS_DIR=$W/ext_main
/usr/bin/time -f "main job cold: %e s" python3 -m kgen.cli search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 \
  --out-dir $W/g --results-dir $W/r > $OUT/mainjob_cold.log 2>&1
tail -3 $OUT/mainjob_cold.log; grep -E "built|full validation|fastest valid|runoff|timed again" $OUT/mainjob_cold.log | cut -c1-200
t "rerun"
/usr/bin/time -f "main job rerun: %e s" python3 -m kgen.cli search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024 \
  --out-dir $W/g --results-dir $W/r > $OUT/mainjob_rerun.log 2>&1
tail -2 $OUT/mainjob_rerun.log; grep -E "^\[" $OUT/mainjob_rerun.log | cut -c1-220
t done
