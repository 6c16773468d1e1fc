# Session 32, call F (kind nvidia-h200-x4, carry .kb): issue 24's yardstick on all 36 files at this
# session's final kernels: KernelBench's eval at bf16 on `kgen generate FILE --dtype bf16`, kgen's
# bench against eager bf16 and torch.compile(mode="max-autotune") in bf16, the files dealt out
# over four GPUs (max-autotune's compiles of 36 files do not fit one GPU's call), the table merged.
GPUS=4 KB_FLAGS="--autotune" PRECISIONS=bf16 EVAL_LIMIT=380 bash scripts/device_kernelbench.sh
