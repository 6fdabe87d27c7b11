"""Tiny randomly initialised Hugging Face models through torch.compile(backend="luminal"),
against eager PyTorch on the same weights."""
import pytest
import torch

import luminal.torch_backend as tb

transformers = pytest.importorskip("transformers")

COMMON = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)

FAMILIES = {
    "llama": lambda: transformers.LlamaConfig(**COMMON, rms_norm_eps=1e-5),
    "qwen3": lambda: transformers.Qwen3Config(**COMMON, head_dim=16, rms_norm_eps=1e-6),
    "gemma3": lambda: transformers.Gemma3TextConfig(**COMMON, head_dim=16, sliding_window=4, query_pre_attn_scalar=16),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(**COMMON, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                                     moe_intermediate_size=32, decoder_sparse_step=1),
    "mixtral": lambda: transformers.MixtralConfig(**COMMON, num_local_experts=4, num_experts_per_tok=2),
}


def tiny(family):
    torch.manual_seed(0)
    config = FAMILIES[family]()
    config._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    return model


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logits_match_eager(family):
    torch._dynamo.reset()
    model = tiny(family)
    ids = torch.tensor([[1, 5, 9, 33, 2, 17, 60, 4, 8]])
    with torch.no_grad():
        want = model(ids, use_cache=False).logits
        got = torch.compile(model, backend="luminal")(ids, use_cache=False).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_bf16_model():
    torch._dynamo.reset()
    model = tiny("llama").to(torch.bfloat16)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    with torch.no_grad():
        want = model(ids, use_cache=False).logits.float()
        got = torch.compile(model, backend="luminal")(ids, use_cache=False).logits.float()
    # luminal accumulates in f32 where PyTorch's CPU bf16 kernels round between steps.
    assert (got - want).abs().max().item() < 0.1
    assert (got.argmax(-1) == want.argmax(-1)).float().mean().item() >= 0.75


def test_decode_loop_with_static_cache_compiles_once():
    """Greedy decoding through a static KV cache: the attended length grows every step, the
    shapes do not, and the decode step compiles once. The prefill runs eagerly first (it
    initialises the cache's Python state, which Dynamo guards on)."""
    torch._dynamo.reset()
    model = tiny("llama")
    from transformers import StaticCache

    def decode(forward, steps=6):
        cache = StaticCache(config=model.config, max_cache_len=32)
        ids = torch.tensor([[1, 2, 3, 4, 5]])
        logits = model(ids, past_key_values=cache, cache_position=torch.arange(5), use_cache=True).logits[:, -1]
        out = [logits]
        for pos in range(5, 5 + steps):
            tok = logits.argmax(-1, keepdim=True)
            logits = forward(tok, past_key_values=cache, cache_position=torch.tensor([pos]), use_cache=True).logits[:, -1]
            out.append(logits)
        return torch.stack(out), cache

    before = tb.compile_count
    with torch.no_grad():
        want, want_cache = decode(model)
        got, got_cache = decode(torch.compile(model, backend="luminal"))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert tb.compile_count - before == 1
    # The keys and values were written into the caller's cache tensors, in place.
    assert sum(m[3] for m in tb.last_graph.mutations) == 2 * model.config.num_hidden_layers
    for g, w in zip(got_cache.layers, want_cache.layers):
        torch.testing.assert_close(g.keys, w.keys, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g.values, w.values, rtol=1e-5, atol=1e-5)


def test_attention_reaches_the_plan_as_one_kernel():
    """transformers' attention call (keys and values repeated per query head, a bool mask) is
    planned as one Attention kernel per layer reading the cache's own kv heads, not PyTorch's
    math form (q and k each scaled, a safe softmax): the logits still match eager."""
    torch._dynamo.reset()
    model = tiny("llama")  # 4 query heads, 2 kv heads
    from transformers import StaticCache

    def step(forward):
        cache = StaticCache(config=model.config, max_cache_len=16)
        model(torch.tensor([[1, 2, 3]]), past_key_values=cache, cache_position=torch.arange(3), use_cache=True)
        return forward(torch.tensor([[4]]), past_key_values=cache, cache_position=torch.tensor([3]), use_cache=True).logits

    with torch.no_grad():
        want = step(model)
        got = step(torch.compile(model, backend="luminal"))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    plan = tb.last_graph.compiled.plan()
    assert plan.count("Kernel(Attention") == model.config.num_hidden_layers
    assert "Softmax" not in plan


def test_weights_are_set_once():
    """Repeated calls set only the inputs that changed (the token ids), not the weights."""
    torch._dynamo.reset()
    model = tiny("llama")
    fn = torch.compile(model, backend="luminal")
    with torch.no_grad():
        fn(torch.tensor([[1, 2, 3]]), use_cache=False)
        graph = tb.last_graph
        sets_before = graph.sets
        for ids in ([[4, 5, 6]], [[7, 8, 9]]):
            fn(torch.tensor(ids), use_cache=False)
    assert graph.sets - sets_before == 2  # one input (the ids) per call


def test_prompts_of_new_lengths_reuse_the_plan():
    """One compile for prompts of several lengths (dynamic sizes from the first call on)."""
    torch._dynamo.reset()
    model = tiny("qwen3")
    fn = torch.compile(model, backend="luminal", dynamic=True)
    before = tb.compile_count
    with torch.no_grad():
        for n in (3, 7, 12, 5):
            ids = torch.arange(1, n + 1).unsqueeze(0) * 7 % 128
            torch.testing.assert_close(fn(ids, use_cache=False).logits, model(ids, use_cache=False).logits, rtol=1e-4, atol=1e-4)
    assert tb.compile_count - before == 1
