# Session 17 (H100): a GEMM weight the forward computes (F.linear(x, self.weight * self.scale),
# F.normalize(self.prototypes) then x @ w.t(), self.u @ self.v): kgen validate (the full gate) of
# weight_equalized_lrelu, weight_cosine and weight_low_rank in fp32 and bf16, each file's output
# beside the reference's at batches 1 and 3, and the time of the equalized-lr file against eager.
. scripts/device_setup.sh
mkdir -p /tmp/s17w
for n in weight_equalized_lrelu weight_cosine weight_low_rank; do
  python3 -m kgen.cli generate docs/experiments/s17/refs/$n.py -o /tmp/s17w/$n.py --force | grep -E "^wrote|kgen:"
  (python3 -m kgen.tune.worker build /tmp/s17w/$n.py > /dev/null 2>&1; python3 -m kgen.tune.worker build --dtype bf16 /tmp/s17w/$n.py > /dev/null 2>&1) &
done; wait
for n in weight_equalized_lrelu weight_cosine weight_low_rank; do for d in "fp32 1e-4" "bf16 1e-2"; do
  set -- $d
  t "validate $n $1"
  timeout 80 python3 -m kgen.cli validate /tmp/s17w/$n.py --ref docs/experiments/s17/refs/$n.py --dtype $1 --tol $2 > $OUT/validate_${n}_$1.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_${n}_$1.log | tail -3
done; done
t "small batches"
python3 - > $OUT/small_batches.log 2>&1 <<'PY'
import torch
for n in ["weight_equalized_lrelu", "weight_cosine", "weight_low_rank"]:
    ref, new = {}, {}
    exec(open(f"docs/experiments/s17/refs/{n}.py").read(), ref)
    exec(open(f"/tmp/s17w/{n}.py").read(), new)
    init = ref["get_init_inputs"]()
    torch.manual_seed(0)
    model = ref["Model"](*init).cuda()
    twin = new["ModelNew"](*init).cuda()
    twin.load_state_dict(model.state_dict())
    k = ref["get_inputs"]()[0].shape[1]
    for b in (1, 3):
        x = torch.randn(b, k, device="cuda")
        with torch.no_grad():
            a, c = model(x), twin(x)
        print(n, b, tuple(a.shape), tuple(c.shape), f"max diff {(a.double() - c.double()).abs().max().item():.2e}")
PY
cat $OUT/small_batches.log
t "time"
python3 scripts/compare_forward.py docs/experiments/s17/refs/weight_equalized_lrelu.py /tmp/s17w/weight_equalized_lrelu.py > $OUT/compare_equalized.log 2>&1; cat $OUT/compare_equalized.log
t done
