# Session 23: the training check's trajectories for the chained GEMMs at 200 rows (and 1000),
# tf32x3 and fp16x3 files, the cap on and off (docs/experiments/s23/train_trajectories.py).
. scripts/device_setup.sh
d=/tmp/s23traj; mkdir -p $d
for math in tf32x3 fp16x3; do for b in 200 1000; do
  kgen generate tests/refs/gemm_sigmoid_gemm_lse.py --math $math --batch $b -o $d/chained_${math}_$b.py --results-dir $d/results > /dev/null
done; done
python3 -m kgen.tune.worker build $d/chained_tf32x3_200.py > /dev/null 2>&1 &
python3 -m kgen.tune.worker build $d/chained_fp16x3_200.py > /dev/null 2>&1 & wait
for args in "tf32x3_200" "tf32x3_200 --no-cap" "fp16x3_200" "tf32x3_1000" "fp16x3_1000"; do
  set -- $args
  t "$args"; python3 docs/experiments/s23/train_trajectories.py $d/chained_$1.py ${1#*_} $2 2>&1 | grep -v Warn
done | tee $OUT/s23_trajectories.log
t done
