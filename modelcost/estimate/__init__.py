"""The kernel-aware estimate: the rates published kernels, collectives and engines reach on
each part.
"""
