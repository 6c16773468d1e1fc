"""The epilogue IR: the graph, the op table (torch oracle + CUDA expression), derivatives, rewrites."""
