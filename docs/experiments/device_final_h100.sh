# The final GPU runs of a session, one device call: the GPU tier (scripts/device_gpu_tier.sh),
# then the training steps of MODULES (docs/experiments/device_training_h100.sh).
REFS_LIMIT=${REFS_LIMIT:-240} SHIPPED_LIMIT=${SHIPPED_LIMIT:-230} bash scripts/device_gpu_tier.sh
[ -n "${MODULES:-}" ] && bash docs/experiments/device_training_h100.sh 2>&1 | grep -v -i warn | tail -50
