"""What is asked of many compiled points: sweeps, diffs, serving and its relatives,
training layouts.
"""
