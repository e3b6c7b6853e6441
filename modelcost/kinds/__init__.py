"""The layer kinds' rooms: each layer kind of the Spec IR says here, in one place, how it
lowers to perf-model ops, how many parameters it has on one device, what it keeps in
memory across decode steps, how it shards and which workloads it refuses.

`room.py` says what a room holds, `emit.py` is the toolkit a lowering writes its nodes
with, one module per kind (or family of kinds) holds its rooms, and `registry.py` maps
each Spec IR class to its room (docs/contributing.md).
"""
