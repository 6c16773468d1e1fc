# Session 17 (H100): torch's own last op on the kernel's output (Graph.output_tail): kgen validate
# (the full gate) of tail_sum (x.sum()), tail_max (torch.max(x)) and tail_squeeze (Linear(in, 1)
# then squeeze()) in fp32 and bf16, and each file's output beside the reference's at a batch of
# 1 and 3 (the shapes: 0-d where torch's is).
. scripts/device_setup.sh
mkdir -p /tmp/s17t
for n in tail_sum tail_max tail_squeeze; do
  python3 -m kgen.cli generate docs/experiments/s17/refs/$n.py -o /tmp/s17t/$n.py --force | grep -E "^wrote|kgen:"
  (python3 -m kgen.tune.worker build /tmp/s17t/$n.py > /dev/null 2>&1; python3 -m kgen.tune.worker build --dtype bf16 /tmp/s17t/$n.py > /dev/null 2>&1) &
done; wait
for n in tail_sum tail_max tail_squeeze; do for d in "fp32 1e-4" "bf16 1e-2"; do
  set -- $d
  t "validate $n $1"
  timeout 80 python3 -m kgen.cli validate /tmp/s17t/$n.py --ref docs/experiments/s17/refs/$n.py --dtype $1 --tol $2 > $OUT/validate_${n}_$1.log 2>&1; echo "exit $?"; grep -E "FAIL|passed" $OUT/validate_${n}_$1.log | tail -3
done; done
t "small batches"
python3 - > $OUT/small_batches.log 2>&1 <<'PY'
import torch
for n in ["tail_sum", "tail_max", "tail_squeeze"]:
    ref, new = {}, {}
    exec(open(f"docs/experiments/s17/refs/{n}.py").read(), ref)
    exec(open(f"/tmp/s17t/{n}.py").read(), new)
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
t done
