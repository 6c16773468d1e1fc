"""Frontend: a reference module file -> its workload (Reference) and its traced epilogue IR."""
