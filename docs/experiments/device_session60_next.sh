# What session 59 leaves for the next session's device time (issues 24, 25).
#
# Session 59 ran session 58's last commits on the GPU (ops, autocast 258, node tiers, validate
# 18 of 18 x 6), KernelBench's eval at bf16 alone (36 of 36, 0.953x by its timing), the odd shapes
# in bf16 (30 of 36, the same six: eager's own error), the node's deleteNode (a 200k chain freed;
# the old node died of SIGSEGV), upcast modules (call D: 18 of 18 on every module but an
# ill-conditioned variance), KernelBench's files respelled (call E: fp32 32, bf16 29; its control
# at the same shape: 33 / 36). Device time ran out before call G. Left for the GPU:
#
# 1. docs/experiments/device_session59_g.sh: the respelled corpus in bf16 again after bc77bfe (a
#    bias added by an op of its own rounds z first, as eager) - call E's 7 failures should pass
#    (the CPU oracle is eager's output bit for bit on them); test_linear_rounding_gpu.py's new
#    separate_bias case. Then the GPU tiers that the rounding change touches: test_half_gpu.py
#    (its refs with a separate bias add), test_linear_rounding_gpu.py in full, KernelBench bf16 on
#    all 36 as published (76: Linear(bias=False) + a bias parameter, now rounded twice as eager).
# 2. The merged probes' changes (respell59: stateless modules built in forward, torch.clone /
#    detach / detach_; upcast59: a parameter's upcast, an in-place op on the upcast value) have CPU
#    tests only: kgen validate of a module of each on the GPU.
# 3. A to_float32 inside a reduced chain keeps the matrix-vector rewrite from applying
#    (affine_chain does not see through it): measure what a `fc(x).float().sum(1)` module loses.
# 4. Issue 24's and 25's H100 goals (only H200s lent in sessions 47-59).
echo "a plan, not a script: read it"
