# Session 33, call E (kind nvidia-h200-x4, carry .kb): KernelBench's eval at bf16 and fp16 on all 36
# files at this session's code, with torch.compile(mode="max-autotune") in the same dtype (issue 24's
# yardstick), the files dealt out over four GPUs.
GPUS=4 KB_FLAGS="--autotune" PRECISIONS="bf16 fp16" EVAL_LIMIT=250 bash scripts/device_kernelbench.sh
