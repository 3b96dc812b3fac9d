"""Imports torch 1.13's Distributed Checkpoint (torch.distributed._shard.checkpoint) under Python 3.11, for the
fixture generators (dcp_write.py, megatron_write.py).

Debian's torch 1.13 cannot import torch.distributed._shard under Python 3.11 (a dataclass field whose default
is a TensorProperties instance: "mutable default ... is not allowed"). Importing this module turns such
defaults into default factories before importing torch; nothing else of torch is changed."""
import copy
import dataclasses

_get_field = dataclasses._get_field


def _patched_get_field(cls, a_name, a_type, *rest):
    default = cls.__dict__.get(a_name, dataclasses.MISSING)
    value = default.default if isinstance(default, dataclasses.Field) else default
    if value is not dataclasses.MISSING and dataclasses.is_dataclass(value) and type(value).__hash__ is None:
        setattr(cls, a_name, dataclasses.field(default_factory=lambda d=value: copy.deepcopy(d)))
    return _get_field(cls, a_name, a_type, *rest)


dataclasses._get_field = _patched_get_field

import torch  # noqa: E402,F401
import torch.distributed as dist  # noqa: E402,F401
import torch.multiprocessing as mp  # noqa: E402,F401
import torch.distributed._shard.checkpoint as dcp  # noqa: E402,F401
from torch.distributed._shard import sharded_tensor  # noqa: E402,F401
from torch.distributed._shard.sharding_spec import ChunkShardingSpec, EnumerableShardingSpec, ShardMetadata  # noqa: E402,F401


def sharded(full, spec):
    """This rank's ShardedTensor of `full` under the sharding spec: each local shard holds its slice of full."""
    st = sharded_tensor.empty(spec, *full.shape, dtype=full.dtype)
    for shard in st.local_shards():
        o, z = shard.metadata.shard_offsets, shard.metadata.shard_sizes
        shard.tensor.copy_(full[tuple(slice(a, a + b) for a, b in zip(o, z))])
    return st
