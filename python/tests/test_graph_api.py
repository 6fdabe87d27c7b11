"""The graph API from Python: build, compile, run, against numpy."""
import json
import os

import numpy as np
import pytest

import luminal as lm
from conftest import TEST_DATA


def test_mlp_over_a_dynamic_batch_matches_numpy():
    g = lm.Graph()
    x = g.input("x", "f32", ["batch", 8])
    w1 = g.input("w1", "f32", [16, 8])
    w2 = g.input("w2", "f32", [4, 16])
    h = lm.relu(lm.linear(x, w1))
    y = lm.softmax(lm.linear(h, w2), -1)
    y.output("y")
    assert [repr(s) for s in y.shape] == ["batch", "4"]
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((16, 8), dtype=np.float32)
    W2 = rng.standard_normal((4, 16), dtype=np.float32)
    for backend in ("cpu", "reference"):
        c = lm.compile(g, backend=backend)
        c.set_input("w1", W1)
        c.set_input("w2", W2)
        for batch in (1, 3, 7):  # one plan for every batch size
            X = rng.standard_normal((batch, 8), dtype=np.float32)
            c.set_input("x", X)
            c.run()
            logits = np.maximum(X @ W1.T, 0) @ W2.T
            want = np.exp(logits - logits.max(-1, keepdims=True))
            want /= want.sum(-1, keepdims=True)
            np.testing.assert_allclose(c.output("y"), want, rtol=1e-5, atol=1e-6)


def test_operators_numbers_and_dtypes():
    g = lm.Graph()
    a = g.input("a", "f32", [5])
    b = g.input("b", "i32", [5])
    ((2.0 * a + 1) / (a - 3)).output("f")
    (b // 2).output("q")
    (b % 3).output("r")
    lm.cast(a, "bf16").output("h")
    (a > 0.5).output("m")
    c = lm.compile(g, backend="reference")
    A = np.array([0.0, 1.5, -2.0, 4.0, 0.25], dtype=np.float32)
    B = np.array([-7, -1, 0, 5, 9], dtype=np.int32)
    c.set_input("a", A)
    c.set_input("b", B)
    c.run()
    np.testing.assert_allclose(c.output("f"), (2 * A + 1) / (A - 3), rtol=1e-6)
    np.testing.assert_array_equal(c.output("q"), B // 2)  # floor division, as Python's
    np.testing.assert_array_equal(c.output("r"), B % 3)
    assert c.output_dtype("h") == "bf16" and c.output("h").dtype == np.uint16
    bits = c.output("h").astype(np.uint32) << 16
    np.testing.assert_array_equal(bits.view(np.float32), A)  # these values are exact in bf16
    np.testing.assert_array_equal(c.output("m"), A > 0.5)


def test_symbolic_exprs():
    s = lm.Expr.var("s")
    e = (s * 4 + 2) // 2
    assert e.eval({"s": 5}) == 11
    assert e.dims() == ["s"]
    assert (s + 0) == s
    assert lm.Expr(7).is_const() and lm.Expr(7).value() == 7


def test_errors_name_the_problem():
    g = lm.Graph()
    x = g.input("x", "f32", [4])
    lm.exp(x).output("y")
    c = lm.compile(g, backend="reference")
    with pytest.raises(lm.Error, match="input 'x' was not set"):
        c.run()
    with pytest.raises(lm.Error, match="expected shape"):
        c.set_input("x", np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(lm.Error, match="int64 -> int32"):
        c.set_input("x", np.zeros(4, dtype=np.int64))
    with pytest.raises(lm.Error, match="backend 'tpu'"):
        lm.compile(g, backend="tpu")
    with pytest.raises(lm.Error):
        lm.Graph().input("x", "f64", [2])
    other = lm.Graph().input("z", "f32", [4])
    with pytest.raises(lm.Error, match="different graphs"):
        lm.add(x, other)


def test_outputs_are_copies_and_inputs_are_set_again_after_changes():
    g = lm.Graph()
    x = g.input("x", "f32", [3])
    (x * 2.0).output("y")
    c = lm.compile(g, backend="reference")
    X = np.array([1, 2, 3], dtype=np.float32)
    c.set_input("x", X)
    c.run()
    y = c.output("y")
    X[:] = 10  # read in place: changed, it is set again (work computed from it may be kept)
    c.set_input("x", X)
    c.run()
    np.testing.assert_array_equal(y, [2, 4, 6])
    np.testing.assert_array_equal(c.output("y"), [20, 20, 20])


@pytest.mark.skipif(lm.cuda_unavailable_reason() == "", reason="a GPU is here")
def test_cuda_without_a_gpu_says_why():
    g = lm.Graph()
    lm.exp(g.input("x", "f32", [4])).output("y")
    with pytest.raises(lm.Error, match="(?i)cuda|driver|gpu"):
        lm.compile(g, backend="cuda")
    # A search would time its candidates on the GPU: it says so before any work.
    with pytest.raises(lm.Error, match="the cuda backend cannot run here"):
        lm.compile(g, backend="cuda", search=2)
    with pytest.raises(lm.Error, match="needs the cuda backend"):
        lm.compile(g, backend="cpu").set_input_device("x", 0, "f32", [4])


def test_take_output_hands_over_the_buffer():
    g = lm.Graph()
    x = g.input("x", "f32", [2, 3])
    lm.transpose(x * 3.0, 0, 1).output("y")
    c = lm.compile(g, backend="cpu")
    X = np.arange(6, dtype=np.float32).reshape(2, 3)
    c.set_input("x", X)
    c.run()
    y = c.take_output("y")
    np.testing.assert_array_equal(y, (X * 3).T)
    with pytest.raises(lm.Error, match="not been computed"):  # it was handed over
        c.output("y")
    c.run()
    np.testing.assert_array_equal(c.take_output("y"), y)


def test_an_input_updated_in_place_writes_into_the_callers_array():
    g = lm.Graph()
    cache = g.input("cache", "f32", [4, 3])
    rows = g.input("rows", "i32", [2, 3])
    vals = g.input("vals", "f32", [2, 3])
    new = lm.scatter(cache, 0, rows, vals)
    lm.sum(new, 1).output("total")
    c = lm.compile(g, backend="cpu")
    assert c.updates_in_place("cache") and not c.updates_in_place("vals")
    C = np.zeros((4, 3), np.float32)
    c.set_input("cache", C, in_place=True)
    c.set_input("rows", np.array([[1, 1, 1], [3, 3, 3]], np.int32))
    c.set_input("vals", np.ones((2, 3), np.float32))
    c.run()
    np.testing.assert_array_equal(c.output("total"), [0, 3, 0, 3])
    np.testing.assert_array_equal(C, [[0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 1]])  # written in place
    with pytest.raises(lm.Error, match="not updated in place"):
        c.set_input("vals", np.ones((2, 3), np.float32), in_place=True)
    with pytest.raises(lm.Error, match="writable C-contiguous"):
        c.set_input("cache", np.zeros((3, 4), np.float32).T, in_place=True)


def test_language_model_matches_transformers_fixture():
    path = os.path.join(TEST_DATA, "models", "llama-tiny")
    ref = json.load(open(os.path.join(path, "reference.json")))
    m = lm.LanguageModel.load(path, backend="cpu", context=64, all_logits=True)
    logits = m.step(ref["input_ids"])
    np.testing.assert_allclose(logits, np.array(ref["logits"], dtype=np.float32), atol=1e-3)
    greedy = lm.LanguageModel.load(path, backend="cpu", context=64)
    out = lm.generate(greedy, ref["input_ids"], max_new_tokens=len(ref["greedy_new_tokens"]), ignore_eos=True)
    assert out["tokens"] == ref["greedy_new_tokens"]
    assert out["stop_reason"] == "max_new_tokens"
    with pytest.raises(lm.Error, match="tokenizer"):
        m.encode("hello")


def test_language_model_bf16_activations_stay_near_transformers():
    path = os.path.join(TEST_DATA, "models", "llama-tiny")
    ref = json.load(open(os.path.join(path, "reference.json")))
    ids = ref["input_ids"] + ref["greedy_new_tokens"]  # 28 rows: past the 16 that take the AMX path
    m = lm.LanguageModel.load(path, backend="cpu", context=64, all_logits=True, activations="bf16")
    logits = np.array(m.step(ids)).reshape(len(ids), -1)[: len(ref["input_ids"])]
    np.testing.assert_allclose(logits, np.array(ref["logits"], dtype=np.float32), atol=0.1)
    with pytest.raises(lm.Error, match="activations must be"):
        lm.LanguageModel.load(path, backend="cpu", context=64, activations="fp8")


def test_language_model_weights_packed_or_not_give_the_same_logits():
    path = os.path.join(TEST_DATA, "models", "llama-tiny")
    ref = json.load(open(os.path.join(path, "reference.json")))
    ids = ref["input_ids"] + ref["greedy_new_tokens"]
    packed = lm.LanguageModel.load(path, backend="cpu", context=64, all_logits=True, packed_weights=True)
    rows = lm.LanguageModel.load(path, backend="cpu", context=64, all_logits=True, packed_weights=False)
    a, b = np.array(packed.step(ids)), np.array(rows.step(ids))
    np.testing.assert_allclose(a, b, atol=1e-4)
    n = len(ref["input_ids"])
    np.testing.assert_allclose(a.reshape(len(ids), -1)[:n], np.array(ref["logits"], dtype=np.float32), atol=1e-3)


def test_language_model_bf16_kv_cache_keeps_the_tokens_near_the_f32_logits():
    path = os.path.join(TEST_DATA, "models", "llama-tiny")
    ref = json.load(open(os.path.join(path, "reference.json")))
    m = lm.LanguageModel.load(path, backend="cpu", context=64, kv_cache="bf16")
    ids, got = list(ref["input_ids"]), []
    for _ in range(len(ref["greedy_new_tokens"])):
        logits = np.array(m.step(ids))
        got.append(int(np.argmax(logits)))
        ids = [got[-1]]
    assert got == ref["greedy_new_tokens"]
    first = np.array(lm.LanguageModel.load(path, backend="cpu", context=64, all_logits=True, kv_cache="bf16").step(ref["input_ids"]))
    np.testing.assert_allclose(first.reshape(len(ref["input_ids"]), -1), np.array(ref["logits"], dtype=np.float32), atol=5e-2)
    with pytest.raises(lm.Error, match="the KV cache must be f32 or bf16"):
        lm.LanguageModel.load(path, backend="cpu", context=64, kv_cache="f16")


def test_a_serialized_graph_loads_and_runs_the_same():
    g = lm.Graph()
    x = g.input("x", "f32", ["n", 4])
    lm.softmax(lm.relu(x) * 2.0, -1).output("y")
    text = g.serialize()
    h = lm.Graph.deserialize(text)
    assert h.serialize() == text
    X = np.random.default_rng(1).standard_normal((3, 4), dtype=np.float32)
    outs = []
    for graph in (g, h):
        c = lm.compile(graph, backend="cpu")
        c.set_input("x", X)
        c.run()
        outs.append(c.output("y"))
    np.testing.assert_array_equal(outs[0], outs[1])
    with pytest.raises(lm.Error, match="line"):
        lm.Graph.deserialize(text.replace("node Add", "node Bogus"))
