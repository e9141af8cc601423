"""torchrun --cfg_parallel: two ranks split the CFG branches, agree with one process, share one trace run."""

from __future__ import annotations

import torch

from helpers.infer import FAST, run_infer
from helpers.traces import event_names, load_trace


def test_cfg_parallel_two_ranks_equal_single_process_and_share_one_run_directory(tmp_path):
    single = run_infer(tmp_path / "single", *FAST, "--no-profile")
    pair = run_infer(tmp_path / "pair", *FAST, "--cfg_parallel", torchrun=2)
    assert single.proc.returncode == 0, single.output
    assert pair.proc.returncode == 0, pair.output

    torch.testing.assert_close(pair.latents, single.latents, rtol=1e-4, atol=1e-4)
    meta = pair.metadata
    assert meta["world_size"] == 2 and meta["cfg_parallel"] and meta["infer_calls"] == 4 + 4

    traces = pair.traces()
    assert len(traces) == 2, traces
    assert traces[0].parent == traces[1].parent  # one run, two workers
    assert sorted(t.name.split("_")[0] for t in traces) == ["rank0", "rank1"]
    for rank, trace in enumerate(traces):
        data = load_trace(trace)
        names = event_names(data)
        assert data["distributedInfo"]["rank"] == rank and data["distributedInfo"]["world_size"] == 2
        branch, other = ("infer_cond", "infer_uncond") if rank == 0 else ("infer_uncond", "infer_cond")
        assert branch in names and other not in names  # each rank ran only its own branch
        assert "cfg_all_gather" in names

    # only rank 0 writes outputs: one preview, one latents file, no per-rank copies
    written = sorted(p.name for p in (pair.cwd / "save_results").iterdir() if p.is_file())
    assert written == ["qwen_image_t2i.json", "qwen_image_t2i.png", "qwen_image_t2i.pt"]
