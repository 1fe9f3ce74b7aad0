"""Frames that alone place an error in its startup phase (pasted tails lack the lines that would)."""

from __future__ import annotations

from triage.model.phases import phase_of_frames

SITE = "/usr/local/lib/python3.12/dist-packages"


def test_the_v1_sampler_before_ready_is_its_warm_up():
    assert phase_of_frames([(f"{SITE}/vllm/v1/sample/sampler.py", "forward")]) == "profiling"


def test_a_model_constructor_is_the_model_being_built_for_its_weights():
    frames = [
        (f"{SITE}/vllm/model_executor/models/llama.py", "__init__"),
        (f"{SITE}/vllm/model_executor/layers/linear.py", "__init__"),
    ]
    assert phase_of_frames(frames) == "loading_weights"


def test_a_model_forward_pass_is_not_loading():
    assert phase_of_frames([(f"{SITE}/vllm/model_executor/models/llama.py", "forward")]) is None


def test_graph_capture_still_frames_a_sampler_warm_up():
    frames = [
        (f"{SITE}/vllm/v1/worker/gpu_model_runner.py", "capture_model"),
        (f"{SITE}/vllm/v1/sample/sampler.py", "forward"),
    ]
    assert phase_of_frames(frames) == "cuda_graph_capture"
