"""Lowering: IR -> the CUDA stages of the forward epilogue and the backward kernels."""
