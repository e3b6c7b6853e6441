"""The records passed between the stages: workloads and layouts, the op graph, the report model."""
