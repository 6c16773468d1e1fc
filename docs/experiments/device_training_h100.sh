# Training steps of emitted files against eager fp32, eager with TF32 allowed and torch.compile
# (scripts/bench_training.py), logs under $OUT. MODULES: REF:batch:in:out, REF a path from the
# repository root (the shipped problems are kgen/refs/<name>.py). Each file: the wgmma 3xTF32
# GEMM at fusion 1, 128x128x32 tiles, 4 stages (not searched).
. scripts/device_setup.sh
mkdir -p $OUT/files
# Build every file first, in parallel (the extensions compile on the 16 cores).
for m in $MODULES; do
  IFS=: read r b i o <<< "$m"
  name=$(basename $r .py)_b${b}_i${i}_o${o}
  timeout 120 python3 -m kgen.cli generate $r --batch $b --in $i --out $o --backend wgmma --math tf32x3 \
    --tile 128x128x32 --warp 16x128 --stages 4 --group 8 --fusion 1 -o $OUT/files/$name.py > /dev/null
  (timeout 300 python3 -c "import runpy; m = runpy.run_path('$OUT/files/$name.py'); m['build']()" > $OUT/files/$name.build.log 2>&1 &)
done
sleep 5; while pgrep -f "m\['build'\]" > /dev/null; do sleep 2; done
t "built"
for m in $MODULES; do
  IFS=: read r b i o <<< "$m"
  name=$(basename $r .py)_b${b}_i${i}_o${o}
  t "training step $name"
  timeout 300 python3 scripts/bench_training.py $r $OUT/files/$name.py 2>&1 | grep -v Warning | tee $OUT/training_$name.log
done
t done
