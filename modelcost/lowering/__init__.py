"""Lowering: a Spec and a workload checked, split into pipeline stages and turned into an
op graph, with what it holds in memory.
"""
