"""Code generation: a Spec and its lowering -> an emitted ModelNew file (templates over plain CUDA)."""
