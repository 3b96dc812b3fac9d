"""Writes the DeepSpeed-ZeRO-style fixtures of tests/fixtures/zero with Debian's python3-torch (1.13), and the
values they hold (expected.json). The fixtures are committed; only regenerating them needs torch.

    /usr/bin/python3 tests/tools/zero_write.py [OUT_DIR]     (default: tests/fixtures/zero)

DeepSpeed is not packaged by Debian, so these files are NOT written by DeepSpeed: they are built here from
its documented checkpoint structure (deepspeed/runtime/engine.py _save_checkpoint / _save_zero_checkpoint,
stage_1_and_2.py and stage3.py state_dict, and what utils/zero_to_fp32.py reads), with the same file names,
dict keys, flattening, partitioning and padding, and with stand-ins for the DeepSpeed classes the real files
pickle (the loss scaler, ZeroStageEnum, fragment_address) registered under DeepSpeed's module paths, so the
pickles name the same globals. Each folder is checked here: torch.load of the files, reassembled the way
zero_to_fp32 does (an independent implementation below), must equal the master weights that were
partitioned, element for element.

Folders (each a run folder with a `latest` pointer and global_step5/):
  zero2/        stage 2, 2 data-parallel ranks, fp16 model weights, two parameter groups, a tied parameter
                (head.weight shares embed.weight), a buffer; moments in torch's optimizer state dict, padded
  zero1_bf16/   DeepSpeed's BF16 optimizer (ZeRO-1): bf16_zero_pp_rank_*_optim_states.pt without zero_stage,
                3 ranks, moments in DeepSpeed's elastic form (a list of per-group dicts, without padding)
  zero3/        stage 3, 3 ranks: each parameter split into ceil(n / 3)-element pieces (the last padded), one
                model-states file per rank whose module holds empty placeholders
  zero2_missing_rank/   zero2 without rank 1's optimizer states
  zero2_lying_shapes/   zero2 whose param_shapes claim a parameter larger than the partitions hold
"""
import collections
import dataclasses
import enum
import math
import os
import shutil
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_output import finish  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "zero")
TAG = "global_step5"


def stand_in_module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    return sys.modules[name]


def register(module, cls):
    cls.__module__ = module
    setattr(stand_in_module(module), cls.__name__, cls)
    return cls


class LossScaler:
    def __init__(self, scale):
        self.cur_scale = scale


class DynamicLossScaler:
    def __init__(self):
        self.cur_scale = 65536.0
        self.cur_iter = 5
        self.last_overflow_iter = -1
        self.scale_factor = 2.0
        self.scale_window = 1000


class ZeroStageEnum(int, enum.Enum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3


@dataclasses.dataclass
class fragment_address:  # noqa: N801 (DeepSpeed's name)
    numel: int
    start: int


register("deepspeed.runtime.fp16.loss_scaler", LossScaler)
register("deepspeed.runtime.fp16.loss_scaler", DynamicLossScaler)
register("deepspeed.runtime.zero.config", ZeroStageEnum)
register("deepspeed.utils.tensor_fragment", fragment_address)

# The model: two parameter groups (weights; biases and norms), sizes that do not divide by the ranks.
GROUPS = [
    [("embed.weight", (11, 6)), ("layers.0.attn.weight", (6, 6)), ("layers.0.mlp.weight", (7, 6))],
    [("layers.0.attn.bias", (6,)), ("norm.weight", (5,))],
]
SHARED = {"head.weight": "embed.weight"}
BUFFERS = {"layers.0.attn.rotary": torch.arange(4, dtype=torch.float32) / 8}


def masters():
    g = torch.Generator().manual_seed(2024)
    return {name: torch.randn(*shape, generator=g) for group in GROUPS for name, shape in group}


def moments():
    g = torch.Generator().manual_seed(7)
    return {key: {name: torch.randn(*shape, generator=g) * (0.01 if key == "exp_avg" else 1e-4) ** (1 if key == "exp_avg" else 2)
                  for group in GROUPS for name, shape in group} for key in ("exp_avg", "exp_avg_sq")}


def module_state(model_dtype, placeholders):
    sd = collections.OrderedDict()
    m = masters()
    for group in GROUPS:
        for name, _ in group:
            sd[name] = torch.empty(0, dtype=model_dtype) if placeholders else m[name].to(model_dtype)
    if not placeholders:
        sd["head.weight"] = sd["embed.weight"]  # tied: one storage, two names
    for name, t in BUFFERS.items():
        sd[name] = t.clone()
    return sd


def model_states(model_dtype, placeholders, world):
    return {
        "module": module_state(model_dtype, placeholders),
        "buffer_names": list(BUFFERS),
        "optimizer": None,
        "param_shapes": [collections.OrderedDict((n, torch.Size(s)) for n, s in group) for group in GROUPS],
        "frozen_param_shapes": None,
        "shared_params": dict(SHARED),
        "frozen_param_fragments": None,
        "lr_scheduler": {"last_batch_iteration": 4, "warmup_num_steps": 100},
        "data_sampler": None,
        "random_ltd": None,
        "sparse_tensor_module_names": set(),
        "skipped_steps": 0,
        "global_steps": 5,
        "global_samples": 40,
        "dp_world_size": world,
        "mp_world_size": 1,
        "ds_config": {"train_batch_size": 8, "zero_optimization": {"stage": 0}},
        "ds_version": "0.14.0",
    }


def flat(values, names):
    return torch.cat([values[n].reshape(-1) for n in names])


def names_of(group):
    return [n for n, _ in group]


def stage12_rank(values, world, rank, lean):
    """Rank's partition of every group (stages 1-2): the group flattened, padded to a multiple of world,
    cut into equal partitions; `lean` drops the last rank's padding (as state_dict saves fp32 groups)."""
    parts, paddings = [], []
    for group in GROUPS:
        f = flat(values, names_of(group))
        padding = (-f.numel()) % world
        f = torch.cat([f, torch.zeros(padding)])
        size = f.numel() // world
        part = f[rank * size:(rank + 1) * size].clone()
        pad = padding if rank == world - 1 else 0
        paddings.append(pad)
        parts.append(part[:size - pad].clone() if lean else part)
    return parts, paddings


def stage3_rank(values, world, rank):
    """Rank's flat partition of every group (stage 3): each parameter cut into ceil(n / world)-element
    pieces (the last padded with zeros), this rank's pieces concatenated in order."""
    parts = []
    for group in GROUPS:
        pieces = []
        for n in names_of(group):
            f = values[n].reshape(-1)
            per = math.ceil(f.numel() / world)
            f = torch.cat([f, torch.zeros(per * world - f.numel())])
            pieces.append(f[rank * per:(rank + 1) * per])
        parts.append(torch.cat(pieces).clone())
    return parts


def param_groups(n):
    return [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01 if g == 0 else 0.0, "params": [g]} for g in range(n)]


def optim_states(stage, world, rank, elastic, bf16_optimizer):
    m, mom = masters(), moments()
    if stage <= 2:
        fp32, paddings = stage12_rank(m, world, rank, lean=True)
        state_parts = {k: stage12_rank(mom[k], world, rank, lean=elastic)[0] for k in mom}
    else:
        fp32 = stage3_rank(m, world, rank)
        paddings = [0] * len(GROUPS)
        state_parts = {k: stage3_rank(mom[k], world, rank) for k in mom}
    per_group = [{"step": torch.tensor(5.0), "exp_avg": state_parts["exp_avg"][g], "exp_avg_sq": state_parts["exp_avg_sq"][g]}
                 for g in range(len(GROUPS))]
    torch_state = {"state": {g: s for g, s in enumerate(per_group)}, "param_groups": param_groups(len(GROUPS))}
    osd = {}
    if not bf16_optimizer:
        osd["zero_stage"] = ZeroStageEnum(stage)
        osd["loss_scaler"] = DynamicLossScaler()
        osd["dynamic_loss_scale"] = True
        osd["overflow"] = False
    osd["clip_grad"] = 1.0
    if stage <= 2:
        osd["base_optimizer_state"] = per_group if elastic else torch_state
        osd["single_partition_of_fp32_groups"] = fp32
        osd["group_paddings"] = paddings
        osd["partition_count"] = [world] * len(GROUPS)
        osd["param_slice_mappings"] = [collections.OrderedDict((n, fragment_address(numel=math.prod(s), start=0)) for n, s in group)
                                       for group in GROUPS]
    else:
        osd["optimizer_state_dict"] = torch_state
        osd["fp32_flat_groups"] = fp32
        osd["partition_count"] = world
    osd["ds_version"] = "0.14.0"
    return {"optimizer_state_dict": osd, "ds_config": {"train_batch_size": 8}, "ds_version": "0.14.0"}


def write_run(folder, stage, world, model_dtype, elastic=False, bf16_optimizer=False):
    step = os.path.join(folder, TAG)
    os.makedirs(step)
    with open(os.path.join(folder, "latest"), "w") as f:
        f.write(TAG)
    prefix = "bf16_" if bf16_optimizer else ""
    if stage <= 2:
        torch.save(model_states(model_dtype, False, world), os.path.join(step, "mp_rank_00_model_states.pt"))
    for r in range(world):
        if stage == 3:
            torch.save(model_states(model_dtype, True, world), os.path.join(step, f"zero_pp_rank_{r}_mp_rank_00_model_states.pt"))
        torch.save(optim_states(stage, world, r, elastic, bf16_optimizer),
                   os.path.join(step, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))


def zero_to_fp32(step):
    """An independent reading of the folder the way DeepSpeed's zero_to_fp32 does: torch.load every file,
    merge the ranks' flat partitions, cut them by param_shapes. Returns {kind: {name: tensor}}."""
    names = sorted(os.listdir(step))
    optim = [torch.load(os.path.join(step, n)) for n in names if n.endswith("optim_states.pt")]
    model = torch.load(os.path.join(step, [n for n in names if n.endswith("model_states.pt")][0]))
    osd = [o["optimizer_state_dict"] for o in optim]
    stage = int(osd[0].get("zero_stage", 1))
    world = osd[0]["partition_count"]
    world = max(world) if isinstance(world, list) else world
    assert world == len(optim)
    shapes = model["param_shapes"]
    out = {}
    for kind in ("fp32_param", "exp_avg", "exp_avg_sq"):
        def group_of(o, g):
            if kind == "fp32_param":
                return o["single_partition_of_fp32_groups" if stage <= 2 else "fp32_flat_groups"][g]
            base = o["base_optimizer_state"] if stage <= 2 else o["optimizer_state_dict"]
            state = base[g] if isinstance(base, list) else base["state"][g]
            return state[kind]
        result = {}
        if stage <= 2:
            for g, group in enumerate(shapes):
                lengths = [o["single_partition_of_fp32_groups"][g].numel() for o in osd]
                full = torch.cat([group_of(o, g)[:n] for o, n in zip(osd, lengths)])
                offset = 0
                for name, shape in group.items():
                    n = math.prod(shape)
                    result[name] = full[offset:offset + n].view(shape)
                    offset += n
        else:
            flats = [torch.cat([group_of(o, g) for g in range(len(shapes))]) for o in osd]
            offset = 0
            for group in shapes:
                for name, shape in group.items():
                    n = math.prod(shape)
                    per = math.ceil(n / world)
                    result[name] = torch.cat([f[offset:offset + per] for f in flats])[:n].view(shape)
                    offset += per
        for alias, target in model["shared_params"].items():
            result[alias] = result[target]
        out[kind] = result
    return out


def values_of(t):
    return [float(x) for x in t.double().reshape(-1).tolist()]


def reference(model_dtype, placeholders):
    m, mom = masters(), moments()
    tensors = {}
    for kind, values in [("fp32_param", m), ("exp_avg", mom["exp_avg"]), ("exp_avg_sq", mom["exp_avg_sq"])]:
        for name, t in list(values.items()) + [(a, values[b]) for a, b in SHARED.items()]:
            tensors[f"optimizer.state.{kind}.{name}"] = {"shape": list(t.shape), "dtype": "float32", "values": values_of(t)}
    module = module_state(model_dtype, placeholders)
    for name, t in module.items():
        if placeholders and t.numel() == 0:
            continue
        tensors[name] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "values": values_of(t)}
    for w in tensors.values():
        w.update(min=min(w["values"]), max=max(w["values"]), sum=math.fsum(w["values"]))
    return tensors


def check(folder):
    got = zero_to_fp32(os.path.join(folder, TAG))
    m, mom = masters(), moments()
    for kind, truth in [("fp32_param", m), ("exp_avg", mom["exp_avg"]), ("exp_avg_sq", mom["exp_avg_sq"])]:
        for name, t in truth.items():
            assert torch.equal(got[kind][name], t), (folder, kind, name)
        assert torch.equal(got[kind]["head.weight"], truth["embed.weight"])


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    runs = {
        "zero2": dict(stage=2, world=2, model_dtype=torch.float16),
        "zero1_bf16": dict(stage=1, world=3, model_dtype=torch.bfloat16, elastic=True, bf16_optimizer=True),
        "zero3": dict(stage=3, world=3, model_dtype=torch.bfloat16),
    }
    expected = {"torch_version": torch.__version__, "runs": {}}
    for name, kw in runs.items():
        folder = os.path.join(OUT, name)
        write_run(folder, **kw)
        check(folder)
        expected["runs"][name] = {"stage": kw["stage"], "world": kw["world"], "tensors": reference(kw["model_dtype"], kw["stage"] == 3)}
    missing = os.path.join(OUT, "zero2_missing_rank")
    shutil.copytree(os.path.join(OUT, "zero2"), missing)
    os.remove(os.path.join(missing, TAG, "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
    lying = os.path.join(OUT, "zero2_lying_shapes")
    shutil.copytree(os.path.join(OUT, "zero2"), lying)
    path = os.path.join(lying, TAG, "mp_rank_00_model_states.pt")
    sd = torch.load(path)
    sd["param_shapes"][0]["layers.0.mlp.weight"] = torch.Size([70, 6])
    torch.save(sd, path)
    finish(OUT, expected, 70)


if __name__ == "__main__":
    main()
