"""kgen: a kernel synthesizer that emits fused CUDA ModelNew files for PyTorch modules."""

__version__ = "0.1.0"
