# Session 39, call E: one fp16 training step of every KernelBench level-2 GEMM file against eager
# fp16 (session 37's call B ran bf16): session 37's script with DTYPE=fp16, cut at 530 s; the
# table is made from whatever logs it left.
# Run as: timeout 590 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
DTYPE=fp16 timeout 530 bash docs/experiments/device_session37_b.sh
cd $OUT && [ -f b.tar ] && tar xf b.tar && rm b.tar; cd - > /dev/null
python3 docs/experiments/s37/training_table.py $OUT/logs > $OUT/table.md; tail -3 $OUT/table.md
