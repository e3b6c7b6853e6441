"""Cost and roofline: an op graph priced forward and backward, bounded on a target, into
the report model; compile runs the pipeline in one call.
"""
