// The `luminal` binary end to end: its JSON outputs against the transformers fixtures, and its
// errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct CliRun {
  int status;
  std::string out;
};

// Runs the CLI with stderr folded into the output when `with_stderr`, and `env` (NAME=value ...)
// in its environment.
CliRun luminal(const std::string& args, bool with_stderr = false, const std::string& env = "") {
  std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(LUMINAL_BIN) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

std::string model(const std::string& name) { return std::string(LUMINAL_TEST_DATA) + "/models/" + name; }

nlohmann::json reference(const std::string& name) {
  return nlohmann::json::parse(std::ifstream(model(name) + "/reference.json"));
}

std::string ids_arg(const nlohmann::json& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : " ") + std::to_string(id.get<int>());
  return "\"" + s + "\"";
}

// The largest |a - b| over two logits arrays ([positions][vocabulary]), whose shapes must match.
void max_logit_difference(const nlohmann::json& a, const nlohmann::json& b, double* worst) {
  *worst = 0;
  ASSERT_EQ(a.size(), b.size());
  for (size_t p = 0; p < a.size(); ++p) {
    ASSERT_EQ(a[p].size(), b[p].size()) << "position " << p;
    for (size_t v = 0; v < a[p].size(); ++v) *worst = std::max(*worst, std::abs(a[p][v].get<double>() - b[p][v].get<double>()));
  }
}

class CliFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(CliFixture, LogitsCommandMatchesTransformers) {
  nlohmann::json ref = reference(GetParam());
  CliRun r = luminal("logits --no-cache --model " + model(GetParam()) + " --ids " + ids_arg(ref["input_ids"]));
  ASSERT_EQ(r.status, 0) << r.out;
  nlohmann::json got = nlohmann::json::parse(r.out);
  double worst = 0;
  ASSERT_NO_FATAL_FAILURE(max_logit_difference(got["logits"], ref["logits"], &worst));
  EXPECT_LE(worst, 1e-3);
}

TEST_P(CliFixture, GenerateJsonReproducesGreedyTokens) {
  nlohmann::json ref = reference(GetParam());
  size_t n = ref["greedy_new_tokens"].size();
  CliRun r = luminal("generate --no-cache --json --ignore-eos --model " + model(GetParam()) + " --ids " +
                  ids_arg(ref["input_ids"]) + " --max-new-tokens " + std::to_string(n));
  ASSERT_EQ(r.status, 0) << r.out;
  nlohmann::json got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["new_token_ids"], ref["greedy_new_tokens"]);
  for (const char* key : {"text", "compile_ms", "ttft_ms", "tpot_ms", "prompt_tokens"}) EXPECT_TRUE(got.contains(key)) << key;
  EXPECT_EQ(got["prompt_tokens"], ref["input_ids"].size());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliFixture,
                         ::testing::Values("llama-tiny", "qwen3-tiny", "gemma3-tiny", "qwen3-moe-tiny", "gemma4-tiny",
                                           "gemma4-moe-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(Cli, EveryCommandHasHelp) {
  for (const char* cmd : {"generate", "chat", "tokenize", "logits", "bench", "compile", "example"}) {
    CliRun r = luminal(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("usage: luminal " + std::string(cmd)), std::string::npos) << cmd << ": " << r.out;
  }
}

TEST(Cli, BadInputGivesAClearErrorAndStatus1) {
  CliRun missing = luminal("generate --model /nonexistent/model --ids \"1 2\"", true);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("'/nonexistent/model' does not exist"), std::string::npos) << missing.out;
  CliRun no_tokenizer = luminal("generate --no-cache --model " + model("llama-tiny") + " --prompt hi", true);
  EXPECT_EQ(no_tokenizer.status, 1);
  EXPECT_NE(no_tokenizer.out.find("--ids"), std::string::npos) << no_tokenizer.out;
  CliRun too_long = luminal("generate --no-cache --context 4 --model " + model("llama-tiny") + " --ids \"1 2 3 4 5\"", true);
  EXPECT_EQ(too_long.status, 1);
  EXPECT_NE(too_long.out.find("context"), std::string::npos) << too_long.out;
  CliRun bad_option = luminal("logits --frobnicate", true);
  EXPECT_EQ(bad_option.status, 1);
  EXPECT_NE(bad_option.out.find("unknown option '--frobnicate'"), std::string::npos) << bad_option.out;
}

// LUMINAL_CPU_KC (the packed GEMM's k block, for measuring): a bad value is an error naming it;
// a small one splits every prefill GEMM of 20 tokens into many k blocks and gives the default's
// logits (the packed path runs from 16 rows).
TEST(Cli, GemmBlockOverrideIsCheckedAndKeepsTheLogits) {
  std::string ids;
  for (int i = 1; i <= 20; ++i) ids += (ids.empty() ? "" : " ") + std::to_string(i * 7);
  const std::string args = "logits --no-cache --model " + model("llama-tiny") + " --ids \"" + ids + "\"";
  CliRun bad = luminal(args, true, "LUMINAL_CPU_KC=12x");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("LUMINAL_CPU_KC must be a whole number"), std::string::npos) << bad.out;
  CliRun base = luminal(args), small = luminal(args, false, "LUMINAL_CPU_KC=6");
  ASSERT_EQ(base.status, 0) << base.out;
  ASSERT_EQ(small.status, 0) << small.out;
  const nlohmann::json a = nlohmann::json::parse(base.out)["logits"], b = nlohmann::json::parse(small.out)["logits"];
  ASSERT_EQ(a.size(), 20u);
  double worst = 0;
  ASSERT_NO_FATAL_FAILURE(max_logit_difference(a, b, &worst));
  EXPECT_LE(worst, 1e-4);
}

// Whether this CPU packs weights at load (backends/cpu/weight_panels.h: AVX-512 and no AMX).
bool cpu_packs_weights() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("flags", 0) == 0) return line.find(" avx512f") != std::string::npos && line.find(" amx_tile") == std::string::npos;
  return false;
}

// Weights packed at load (--packed-weights) against W's rows (--no-packed-weights): the same
// logits for a 20-token prompt (prefill's GEMM tiles over the panels, the untied head too) and
// the fixture's greedy tokens (decode's panel GEMV); bench counts the packed weights (an untied
// embedding is not one, a tied one is); a bad LUMINAL_CPU_PACKED_WEIGHTS is an error naming it.
TEST(Cli, PackedWeightsKeepTheLogitsAndTokens) {
  std::string ids;
  for (int i = 1; i <= 20; ++i) ids += (ids.empty() ? "" : " ") + std::to_string(i * 7);
  const std::string args = "logits --no-cache --model " + model("llama-tiny") + " --ids \"" + ids + "\"";
  CliRun rows = luminal(args + " --no-packed-weights"), packed = luminal(args + " --packed-weights");
  ASSERT_EQ(rows.status, 0) << rows.out;
  ASSERT_EQ(packed.status, 0) << packed.out;
  double worst = 0;
  ASSERT_NO_FATAL_FAILURE(max_logit_difference(nlohmann::json::parse(rows.out)["logits"], nlohmann::json::parse(packed.out)["logits"], &worst));
  EXPECT_LE(worst, 1e-4);
  // With --huge-pages the weights not packed (norms, the untied embedding) go to the arena,
  // sized without the packed ones.
  CliRun huge = luminal(args + " --huge-pages");
  ASSERT_EQ(huge.status, 0) << huge.out;
  ASSERT_NO_FATAL_FAILURE(max_logit_difference(nlohmann::json::parse(rows.out)["logits"], nlohmann::json::parse(huge.out)["logits"], &worst));
  EXPECT_LE(worst, 1e-4);

  nlohmann::json ref = reference("llama-tiny");
  CliRun gen = luminal("generate --no-cache --json --ignore-eos --packed-weights --model " + model("llama-tiny") + " --ids " +
                       ids_arg(ref["input_ids"]) + " --max-new-tokens " + std::to_string(ref["greedy_new_tokens"].size()));
  ASSERT_EQ(gen.status, 0) << gen.out;
  EXPECT_EQ(nlohmann::json::parse(gen.out)["new_token_ids"], ref["greedy_new_tokens"]);

  // llama-tiny: 2 layers of 7 linear weights and an untied head; its embedding is gathered.
  const std::string bench = "bench --no-cache --model " + model("llama-tiny") + " --prompt-tokens 4 --new-tokens 2 --iters 1";
  CliRun on = luminal(bench + " --packed-weights"), off = luminal(bench, false, "LUMINAL_CPU_PACKED_WEIGHTS=0");
  ASSERT_EQ(on.status, 0) << on.out;
  ASSERT_EQ(off.status, 0) << off.out;
  EXPECT_EQ(nlohmann::json::parse(on.out)["packed_weights"], cpu_packs_weights() ? 15 : 0);
  EXPECT_EQ(nlohmann::json::parse(off.out)["packed_weights"], 0);
  // qwen3-tiny: 2 layers of 7 and its tied embedding, gathered (from the panels) and the head's W.
  CliRun tied = luminal("bench --no-cache --model " + model("qwen3-tiny") + " --prompt-tokens 4 --new-tokens 2 --iters 1");
  ASSERT_EQ(tied.status, 0) << tied.out;
  EXPECT_EQ(nlohmann::json::parse(tied.out)["packed_weights"], cpu_packs_weights() ? 15 : 0);
  CliRun bad = luminal(bench, true, "LUMINAL_CPU_PACKED_WEIGHTS=yes");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("LUMINAL_CPU_PACKED_WEIGHTS must be 0 or 1, got 'yes'"), std::string::npos) << bad.out;
}

// --backend cuda: on a GPU machine it generates the fixture's greedy tokens; anywhere else it
// fails at once with what is missing, never a crash.
TEST(Cli, CudaBackendRunsOrSaysWhyNot) {
  nlohmann::json ref = reference("llama-tiny");
  CliRun r = luminal("generate --no-cache --backend cuda --json --max-new-tokens 4 --model " + model("llama-tiny") + " --ids " +
                         ids_arg(ref["input_ids"]),
                     true);
  if (r.status == 0) {
    EXPECT_NE(r.out.find("\"new_token_ids\""), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("the cuda backend cannot run here: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Segmentation"), std::string::npos) << r.out;
}

// compile --backend cuda: the search times candidates on the GPU, or the command says at once why
// it cannot; a backend luminal does not have is named in the error.
TEST(Cli, CompileSearchOnCudaRunsOrSaysWhyNot) {
  CliRun r = luminal("compile --no-cache --backend cuda --layers 1 --search 2", true);
  if (r.status == 0) {
    EXPECT_NE(r.out.find("search"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("the cuda backend cannot run here: "), std::string::npos) << r.out;
  }
  CliRun bad = luminal("compile --no-cache --backend tpu", true);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("--backend must be cpu, cuda or reference, got 'tpu'"), std::string::npos) << bad.out;
}

TEST(Cli, BenchPrintsOneJsonLine) {
  CliRun r = luminal("bench --no-cache --model " + model("qwen3-tiny") + " --prompt-tokens 8 --new-tokens 4 --iters 2");
  ASSERT_EQ(r.status, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"compile_ms", "ttft_ms", "tpot_ms", "tokens_per_s", "peak_rss_bytes"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j["tpot_ms"].get<double>(), 0);
  // Every iteration's times, and the medians among them.
  ASSERT_EQ(j["ttft_ms_each"].size(), 2u);
  ASSERT_EQ(j["tpot_ms_each"].size(), 2u);
  const double lo = std::min(j["tpot_ms_each"][0].get<double>(), j["tpot_ms_each"][1].get<double>());
  const double hi = std::max(j["tpot_ms_each"][0].get<double>(), j["tpot_ms_each"][1].get<double>());
  EXPECT_GE(j["tpot_ms"].get<double>(), lo);
  EXPECT_LE(j["tpot_ms"].get<double>(), hi);
}

}  // namespace
