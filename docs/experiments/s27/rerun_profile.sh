# Session 27: where the main job's rerun spends the ~3-4 s outside its search's 1 s (3.8 s and
# 5.0 s wall in two calls): the same rerun three times, then once under cProfile (the
# process's own functions, imports included) with its wall time beside, and the bare imports.
set -u
scratch=$(mktemp -d)
export TORCH_EXTENSIONS_DIR="$scratch/torch_extensions" KGEN_CACHE_DIR="$scratch/kgen_cache"
cd "$scratch"
job=(search --problem gemm_scale_bn --in 8192 --out 8192 --batch 1024)
s=$(date +%s.%N); kgen "${job[@]}" > cold.log 2>&1; echo "cold rc=$? $(python3 -c "print(f'{$(date +%s.%N) - $s:.1f}')") s"
for i in 1 2 3; do
  s=$(date +%s.%N); kgen "${job[@]}" > rerun$i.log 2>&1; echo "rerun $i: rc=$? $(python3 -c "print(f'{$(date +%s.%N) - $s:.2f}')") s"
done
for stmt in "import torch" "import torch; torch.cuda.init()" "import kgen.cli" "import kgen.cli, kgen.tune.search"; do
  s=$(date +%s.%N); python3 -c "$stmt"; echo "python3 -c '$stmt': $(python3 -c "print(f'{$(date +%s.%N) - $s:.2f}')") s"
done
s=$(date +%s.%N)
python3 -m cProfile -o rerun.prof -m kgen.cli "${job[@]}" > rerun_prof.log 2>&1
echo "profiled rerun: $(python3 -c "print(f'{$(date +%s.%N) - $s:.2f}')") s wall"
python3 -c "
import pstats; p = pstats.Stats('rerun.prof'); print('profiled total', round(p.total_tt, 2), 's')
p.sort_stats('cumulative').print_stats(40)" | cut -c1-180 | sed -n 1,70p
