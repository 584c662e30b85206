"""A compiled training step that a worker process compiles once: ``compile: auto`` from the recorded GPU
rates ([`bert_kd.core.training.speed_record`][]), the compiled parameter update (gradient clipping and
AdamW) and the count of what TorchDynamo compiled during a run.

Kept free of the rest of the package (torch and the speed record only), like [`bert_kd.core.training.precision`][].

Reuse across runs: TorchDynamo caches compiled code on the code object it traced (``Module._call_impl``,
[`clip_and_step`][]), guarded by what the code read. Modules are inlined (PyTorch's
``inline_inbuilt_nn_modules``), so the guards check a module's class, its parameters' shapes and dtypes
and the input shapes, not the module object: a later run in the same process whose model has the same
class, config and batch shapes reuses the graphs an earlier run compiled (tested by
``tests/core/training/test_compiled_step.py``). The update is one function per process and compile
setting for the same reason.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch.optim.adam import adam

from bert_kd.core.training.speed_record import AUTO_COMPILE, compile_break_even_steps

log = logging.getLogger(__name__)


def resolve_compile(setting, device: str | torch.device, steps: int, signature: tuple | None = None):
    """What a run compiles with (a ``compile`` setting, or ``False``). ``auto``: off on a CPU (compiling a
    training graph there takes minutes and no CPU gain is recorded); on a CUDA GPU [`AUTO_COMPILE`][] when
    this process has already compiled a run of the same ``signature`` (the graphs are reused: no compile
    cost) or the run's ``steps`` reach [`compile_break_even_steps`][], else off. Other settings pass."""
    if setting != "auto":
        return setting
    if torch.device(device).type != "cuda":
        return False
    if signature is not None and signature in _COMPILED_SIGNATURES:
        return AUTO_COMPILE
    return AUTO_COMPILE if steps >= compile_break_even_steps() else False


_COMPILED_SIGNATURES: set = set()


def remember_compiled(signature) -> None:
    """Record that this process compiled a run of ``signature`` ([`resolve_compile`][] reuses it)."""
    _COMPILED_SIGNATURES.add(signature)


def run_signature(model: torch.nn.Module, batch_size: int, setting, precision: str) -> tuple:
    """What decides whether a run reuses an earlier run's graphs: the model class and config, the batch
    size, the compile setting and the precision."""
    config = getattr(model, "config", None)
    described = config.to_json_string(use_diff=False) if hasattr(config, "to_json_string") else repr(config)
    return (type(model).__qualname__, described, batch_size, str(setting), precision)


def clip_and_step(
    optimizer: torch.optim.AdamW, parameters: Sequence[torch.Tensor], max_norm: float, update: Callable | None = None
) -> None:
    """One parameter update of ``optimizer`` (a torch AdamW): clip the gradients' global norm to ``max_norm``
    (none with 0), then AdamW's step, through [`adamw_update`][] (compiled by [`compiled_update`][]).
    The optimizer's state is AdamW's own (``step``, ``exp_avg``, ``exp_avg_sq``), so checkpoints and an
    eager ``optimizer.step()`` read it as they always do. ``parameters`` are those the norm is taken over;
    ``update``: [`adamw_update`][] or its compiled form."""
    groups = []
    for group in optimizer.param_groups:
        with_grad = [p for p in group["params"] if p.grad is not None]
        for p in with_grad:
            if p not in optimizer.state or not optimizer.state[p]:  # AdamW's first-step state, same layout
                optimizer.state[p] = {
                    "step": torch.tensor(0.0, dtype=torch.float32, device=p.device if _on_device(group) else "cpu"),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
        state = [optimizer.state[p] for p in with_grad]
        groups.append(
            (
                with_grad,
                [p.grad for p in with_grad],
                [s["exp_avg"] for s in state],
                [s["exp_avg_sq"] for s in state],
                [s["step"] for s in state],
                group["lr"],
                {k: group[k] for k in ("weight_decay", "eps", "fused", "foreach", "capturable", "maximize")},
                tuple(group["betas"]),
            )
        )
    (update or adamw_update)(groups, [p for p in parameters if p.grad is not None], float(max_norm))
    optimizer._opt_called = True  # what optimizer.step() marks: the schedule then steps without a warning


def _on_device(group) -> bool:
    """AdamW keeps ``step`` on the parameters' device when fused or capturable, on the CPU otherwise."""
    return bool(group.get("fused") or group.get("capturable"))


@torch.no_grad()
def adamw_update(groups, clipped: list[torch.Tensor], max_norm: float) -> None:
    """Clip the gradients of ``clipped`` to the global norm ``max_norm`` (PyTorch's ``get_total_norm`` and
    ``clip_grads_with_norm_``, as ``clip_grad_norm_`` does) and apply PyTorch's functional AdamW to every
    group. Only tensors and fixed hyperparameters come in, so TorchDynamo's guards check their shapes, not
    which optimizer or model they belong to: a later run's update reuses the compiled one."""
    if max_norm:
        total = torch.nn.utils.get_total_norm([p.grad for p in clipped])
        torch.nn.utils.clip_grads_with_norm_(clipped, max_norm, total)
    for params, grads, exp_avgs, exp_avg_sqs, steps, lr, settings, (beta1, beta2) in groups:
        adam(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            foreach=settings["foreach"],
            capturable=settings["capturable"],
            fused=settings["fused"],
            decoupled_weight_decay=True,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=lr,
            weight_decay=settings["weight_decay"],
            eps=settings["eps"],
            maximize=settings["maximize"],
        )


_UPDATES: dict[str, Callable] = {}


def update_backend(setting) -> str | None:
    """The backend the update compiles with for a model ``compile`` setting: inductor's default mode for
    the inductor modes (the update's parameters change every step, which CUDA-graph replay would copy),
    the named backend otherwise; ``None`` when off."""
    from bert_kd.core.training.precision import INDUCTOR_MODES, compile_backend

    backend = compile_backend(setting)
    return "inductor" if backend in INDUCTOR_MODES else backend


def compiled_update(setting) -> Callable | None:
    """[`clip_and_step`][] with [`adamw_update`][] compiled for ``setting``, one compiled function per
    process and backend (so runs share it); ``None`` when off."""
    backend = update_backend(setting)
    if backend is None:
        return None
    if backend not in _UPDATES:
        _UPDATES[backend] = _eager_if_it_fails_to_compile(torch.compile(adamw_update, backend=backend), backend)
    return functools.partial(clip_and_step, update=_UPDATES[backend])


def _eager_if_it_fails_to_compile(compiled: Callable, backend: str) -> Callable:
    """``compiled``, or [`adamw_update`][] itself (with a warning naming the error) for the rest of the
    process when its first call fails to compile: the update's numbers are the same either way, only
    its speed differs, and compilation fails before anything is updated. A later failure is raised."""
    state = {"worked": False, "failed": False}

    def update(*args):
        if state["failed"]:
            return adamw_update(*args)
        try:
            result = compiled(*args)
        except Exception as error:  # a backend's compile error (TorchDynamo wraps them in several types)
            if state["worked"]:
                raise
            state["failed"] = True
            log.warning("the compiled parameter update (%s) failed to compile, so it runs eager: %s", backend, error)
            return adamw_update(*args)
        state["worked"] = True
        return result

    return update


@dataclass
class CompileCounts:
    """What TorchDynamo compiled: graphs, recompilations (a frame compiled again because its cached graphs'
    guards failed: a new shape, a changed constant) and seconds spent compiling frames."""

    graphs: int = 0
    recompiles: int = 0
    seconds: float = 0.0

    @classmethod
    def now(cls) -> CompileCounts:
        """This process's totals so far (counting recompilations from the first call on)."""
        from torch._dynamo.utils import compilation_time_metrics, counters

        _count_recompiles()
        return cls(
            graphs=int(counters["stats"]["unique_graphs"]),
            recompiles=_RECOMPILES[0],
            seconds=float(sum(compilation_time_metrics.get("_compile.compile_inner", ()))),
        )

    def since(self, earlier: CompileCounts) -> CompileCounts:
        """What was compiled between ``earlier`` and this count."""
        return CompileCounts(
            self.graphs - earlier.graphs, self.recompiles - earlier.recompiles, self.seconds - earlier.seconds
        )

    def as_metrics(self, prefix: str = "compile/") -> dict[str, float]:
        """``compile/graphs``, ``compile/recompiles``, ``compile/seconds`` (seconds rounded to 0.1)."""
        return {
            f"{prefix}graphs": self.graphs,
            f"{prefix}recompiles": self.recompiles,
            f"{prefix}seconds": round(self.seconds, 1),
        }


_RECOMPILES = [0]
_COUNTING = [False]


def _on_compile_start(*args) -> None:
    """TorchDynamo's compile-start callback: a frame's compile id ``F/N`` with ``N > 0`` is its N-th
    recompilation (restarts of one compilation, ``F/N_A``, are not counted again)."""
    try:
        (callback_args,) = args
        if callback_args.callback_trigger.name != "DYNAMO":
            return
        frame_compile = str(callback_args.compile_id).rpartition("/")[2]
        if "_" not in frame_compile and int(frame_compile) > 0:
            _RECOMPILES[0] += 1
    except (ValueError, AttributeError, TypeError):  # another PyTorch's callback signature: count nothing
        return


def _count_recompiles() -> None:
    """Register `_on_compile_start` once per process."""
    if not _COUNTING[0]:
        from torch._dynamo.callback import callback_handler

        callback_handler.register_start_callback(_on_compile_start)
        _COUNTING[0] = True
