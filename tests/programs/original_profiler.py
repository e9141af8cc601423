"""Behaves like LightX2V's original lightx2v/utils/torch_trace_profiler.py (ModelTC/LightX2V): written for the
tests from its public behaviour, not copied. Used side by side with the drop-in (tests/test_profiler_compat.py).

What matters here is what a caller of the original sees: the names, their arguments and results, the files they
leave, the lines they log. The original logs through loguru; this stand-in logs the same text through the standard
library (the tests' machine has no loguru). Its flaw is kept: the once-per-session flag lives on each profiler
object, so every new object profiles again, and tensorboard traces go straight into ``tb_dir``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Callable, Optional, TypeVar

T = TypeVar("T")
logger = logging.getLogger("original_torch_trace_profiler")


def _absolute(path: str) -> str:
    return os.path.abspath(path)


@dataclass
class TorchTraceProfileConfig:
    profile_format: str = "tensorboard"
    tb_dir: str = field(default_factory=lambda: os.path.join(os.getcwd(), "save_results", "torch_profile"))
    chrome_path: str = field(default_factory=lambda: os.path.join(os.getcwd(), "save_results", "trace.json"))
    wait: int = 1
    warmup: int = 3
    active: int = 1
    with_stack: bool = False
    tensorboard_port: int = 16006
    exported_chrome_path: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.tb_dir, self.chrome_path = _absolute(self.tb_dir), _absolute(self.chrome_path)

    @property
    def steps(self) -> int:
        return self.wait + self.warmup + self.active


def make_on_trace_ready(cfg: TorchTraceProfileConfig) -> Callable:
    if cfg.profile_format == "tensorboard":
        from torch.profiler import tensorboard_trace_handler

        os.makedirs(cfg.tb_dir, exist_ok=True)
        return tensorboard_trace_handler(cfg.tb_dir)

    def export(prof) -> None:
        os.makedirs(os.path.dirname(cfg.chrome_path) or ".", exist_ok=True)
        prof.export_chrome_trace(cfg.chrome_path)
        cfg.exported_chrome_path = cfg.chrome_path
        logger.info(f"[Profile] step={prof.step_num} chrome={cfg.chrome_path}")

    return export


def log_profile_start(cfg: TorchTraceProfileConfig, name: Optional[str] = None) -> None:
    logger.info(f"[Profile] {name + ': ' if name else ''}torch trace start: format={cfg.profile_format}, "
                f"tb_dir={cfg.tb_dir}, chrome={cfg.chrome_path}, steps={cfg.steps}, "
                f"schedule=wait{cfg.wait}_warmup{cfg.warmup}_active{cfg.active}, with_stack={cfg.with_stack}")


def log_profile_done(cfg: TorchTraceProfileConfig) -> None:
    lines = ["[Profile] torch trace export finished."]
    if cfg.profile_format == "tensorboard":
        lines += [f"  TensorBoard logdir: {cfg.tb_dir}",
                  f"  tensorboard --logdir {cfg.tb_dir} --port {cfg.tensorboard_port} --bind_all",
                  f"  Open PYTORCH PROFILER: http://127.0.0.1:{cfg.tensorboard_port}/#pytorch_profiler"]
    else:
        lines += [f"  Chrome trace: {cfg.exported_chrome_path or cfg.chrome_path}",
                  "  Open in Perfetto: https://ui.perfetto.dev/"]
    logger.info("\n".join(lines))


class TorchTraceProfiler:
    _session_done = False  # read through self below, written on self: per object in effect

    def __init__(self, cfg: TorchTraceProfileConfig):
        self.cfg = cfg
        self._ran = False
        self._owner: Optional[str] = None

    @classmethod
    def reset_session(cls) -> None:
        cls._session_done = False

    @property
    def ran(self) -> bool:
        return self._ran

    def try_claim(self, label: str) -> bool:
        if self._session_done:
            return False
        if self._owner is None:
            self._owner = label
        if self._owner != label:
            logger.warning(f"[Profile] Skip torch trace for '{label}': already profiling '{self._owner}'")
            return False
        return True

    def run(self, step_fn: Callable[[], T]) -> T:
        import torch.profiler as tp

        cfg = self.cfg
        with tp.profile(activities=[tp.ProfilerActivity.CPU], with_stack=cfg.with_stack,
                        schedule=tp.schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=1),
                        on_trace_ready=make_on_trace_ready(cfg)) as prof:
            for _ in range(cfg.steps):
                result = step_fn()
                prof.step()
        self._ran = True
        self._session_done = True
        log_profile_done(cfg)
        return result


class TorchTraceProfileContext:
    def __init__(self, name: Optional[str] = None, *, profile_format: str = "tensorboard",
                 tb_dir: Optional[str] = None, chrome_path: Optional[str] = None, wait: int = 1, warmup: int = 3,
                 active: int = 1, with_stack: bool = False, tensorboard_port: int = 16006):
        self.label = name
        kwargs = {k: v for k, v in (("tb_dir", tb_dir), ("chrome_path", chrome_path)) if v}
        self._profiler = TorchTraceProfiler(TorchTraceProfileConfig(
            profile_format=profile_format, wait=wait, warmup=warmup, active=active, with_stack=with_stack,
            tensorboard_port=tensorboard_port, **kwargs))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, func: Callable[..., T], /, *args, **kwargs) -> T:
        label = self.label or getattr(func, "__qualname__", "torch_trace")
        if not self._profiler.try_claim(label):
            return func(*args, **kwargs)
        log_profile_start(self._profiler.cfg, name=label)
        return self._profiler.run(lambda: func(*args, **kwargs))
