// Language models for Python: load a Hugging Face folder or a GGUF file, step through tokens,
// generate text (the CLI's generate job as a function), tokenize.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "models/generate.h"
#include "models/language_model.h"
#include "models/model_files.h"
#include "python/bindings.h"

namespace luminal::python {

namespace {

struct PyModel {
  std::unique_ptr<LanguageModel> model;
  std::optional<Tokenizer> tokenizer;
};

std::unique_ptr<PyModel> load(const std::string& path, const std::string& backend, int64_t context, int threads, int search,
                              bool all_logits, const std::string& activations, bool packed_weights, const std::string& kv_cache) {
  ModelOptions o;
  o.backend = backend;
  o.context = context;
  o.threads = threads;
  o.search = search;
  o.all_logits = all_logits;
  o.bf16_activations = ModelOptions::bf16_activations_named(activations);
  o.packed_weights = packed_weights;
  o.kv_dtype = ModelOptions::kv_dtype_named(kv_cache);
  auto m = std::make_unique<PyModel>();
  m->tokenizer = open_tokenizer(path);
  m->model = std::make_unique<LanguageModel>(LanguageModel::load(path, o));
  return m;
}

const Tokenizer& tokenizer_of(const PyModel& m) {
  if (!m.tokenizer) throw Error("this model has no tokenizer (tokenizer.json beside config.json): pass token ids instead of text");
  return *m.tokenizer;
}

py::dict generate_ids(PyModel& m, const std::vector<int32_t>& prompt, int64_t max_new_tokens, double temperature, int64_t top_k,
                      double top_p, uint64_t seed, bool ignore_eos) {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.sampling.temperature = temperature;
  o.sampling.top_k = top_k;
  o.sampling.top_p = top_p;
  o.sampling.seed = seed;
  o.ignore_eos = ignore_eos;
  const Tokenizer* tok = m.tokenizer ? &*m.tokenizer : nullptr;
  o.eos_ids = default_stop_ids(*m.model, tok);
  GenerateResult r;
  {
    py::gil_scoped_release nogil;
    r = generate(*m.model, prompt, o, tok);
  }
  py::dict d;
  d["tokens"] = r.new_tokens;
  d["text"] = r.text;
  d["stop_reason"] = r.stop_reason;
  d["ttft_ms"] = r.ttft_ms;
  d["tpot_ms"] = r.tpot_ms;
  return d;
}

}  // namespace

void bind_models(py::module_& m) {
  py::class_<PyModel>(m, "LanguageModel", "A loaded LLM: weights, compiled plan, KV cache and tokenizer")
      .def_static("load", &load, py::arg("path"), py::arg("backend") = "cpu", py::arg("context") = 0, py::arg("threads") = 0,
                  py::arg("search") = 0, py::arg("all_logits") = false, py::arg("activations") = "f32", py::arg("packed_weights") = true,
                  py::arg("kv_cache") = "f32",
                  "a Hugging Face folder (config.json, *.safetensors, tokenizer.json) or a .gguf file; activations='bf16' "
                  "runs prefill's matrix products on bf16 activations (as PyTorch runs a bf16 model); packed_weights=False "
                  "reads bf16 weights' rows in place instead of packing them at load (cpu backend, where AVX-512 and no AMX); "
                  "kv_cache='bf16' keeps the KV cache in bf16 (half its memory; cpu and reference backends)")
      .def("step", [](PyModel& self, const std::vector<int32_t>& ids) {
        std::vector<float> logits;
        {
          py::gil_scoped_release nogil;
          logits = self.model->step(ids);
        }
        const int64_t vocab = self.model->config().vocab;
        const int64_t rows = static_cast<int64_t>(logits.size()) / vocab;
        py::array_t<float> a(rows > 1 || logits.size() != static_cast<size_t>(vocab) ? std::vector<int64_t>{rows, vocab} : std::vector<int64_t>{vocab});
        std::memcpy(a.mutable_data(), logits.data(), logits.size() * sizeof(float));
        return a;
      }, py::arg("ids"), "run token ids after the cached ones; the last position's logits (every position's with all_logits)")
      .def("reset", [](PyModel& self) { self.model->reset(); })
      .def("rewind", [](PyModel& self, int64_t n) { self.model->rewind(n); })
      .def_property_readonly("position", [](const PyModel& self) { return self.model->position(); })
      .def_property_readonly("context", [](const PyModel& self) { return self.model->context(); })
      .def_property_readonly("vocab_size", [](const PyModel& self) { return self.model->config().vocab; })
      .def_property_readonly("architecture", [](const PyModel& self) { return self.model->config().model_type; })
      .def_property_readonly("backend", [](const PyModel& self) { return self.model->backend(); })
      .def_property_readonly("compile_ms", [](const PyModel& self) { return self.model->compile_ms(); })
      .def_property_readonly("kernel_status", [](const PyModel& self) { return self.model->jit_status(); },
                             "what the kernel generator did (and, on cuda, how runs went: launched, recorded, replayed)")
      .def("encode", [](const PyModel& self, const std::string& text, bool special) { return tokenizer_of(self).encode(text, special); },
           py::arg("text"), py::arg("add_special_tokens") = true)
      .def("decode", [](const PyModel& self, const std::vector<int32_t>& ids, bool skip) { return tokenizer_of(self).decode(ids, skip); },
           py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def("generate", [](PyModel& self, const py::object& prompt, int64_t n, double t, int64_t k, double p, uint64_t seed, bool ignore_eos) {
        std::vector<int32_t> ids = py::isinstance<py::str>(prompt) ? tokenizer_of(self).encode(prompt.cast<std::string>(), true)
                                                                   : prompt.cast<std::vector<int32_t>>();
        self.model->reset();
        return generate_ids(self, ids, n, t, k, p, seed, ignore_eos);
      }, py::arg("prompt"), py::arg("max_new_tokens") = 128, py::arg("temperature") = 0.0, py::arg("top_k") = 0, py::arg("top_p") = 1.0,
         py::arg("seed") = 0, py::arg("ignore_eos") = false,
         "text or token ids in; a dict with the new tokens, their text, why it stopped, TTFT and TPOT (ms)");
}

}  // namespace luminal::python
