// The zoo against reference facts: parameter counts exactly as torchvision / Hugging Face,
// forward multiply-accumulates within 1 % of torchvision's published figures
// (../shared/validation/model_facts.csv, source torchvision_meta).

#include <doctest/doctest.h>

#include "approx.hpp"

#include <cmath>
#include <set>

#include "model/analysis.hpp"
#include "model/loader.hpp"

using namespace dlsim;
using namespace dlsim::model;

namespace {

ModelStats stats(const std::string& name, const ParamOverrides& set = {}) {
  return analyze(load_model(name, set), 1, Precision::kFp32);
}

double relative_error(double got, double want) { return std::abs(got - want) / want; }

}  // namespace

TEST_CASE("zoo_lists_every_model") {
  const std::vector<std::string> expected = {
      "alexnet",     "bert_base",    "bert_large", "googlenet", "gpt2",
      "gpt2_medium", "inception_v3", "resnet101",  "resnet152", "resnet18",
      "resnet34",    "resnet50",     "vgg11",      "vgg16",     "vgg19"};
  auto names = zoo_names();
  std::sort(names.begin(), names.end());
  auto sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  CHECK(names == sorted);
}

TEST_CASE("cnn_parameter_counts_equal_torchvision_exactly") {
  const std::vector<std::pair<std::string, std::int64_t>> facts = {
      {"alexnet", 61100840},   {"googlenet", 6624904},  {"inception_v3", 27161264},
      {"resnet18", 11689512},  {"resnet34", 21797672},  {"resnet50", 25557032},
      {"resnet101", 44549160}, {"resnet152", 60192808}, {"vgg11", 132863336},
      {"vgg16", 138357544},    {"vgg19", 143667240}};
  for (const auto& fact : facts) {
    const auto& name = fact.first;  // CAPTURE needs a variable, not a binding (clang < 16)
    const auto params = fact.second;
    CAPTURE(name);
    CHECK(stats(name).params == params);
  }
}

TEST_CASE("cnn_forward_macs_within_one_percent_of_torchvision") {
  // torchvision's "GFLOPS" column counts multiply-accumulates of conv and linear layers.
  // Inception v3 is counted in eval mode, i.e. without the auxiliary head.
  const std::vector<std::tuple<std::string, double, ParamOverrides>> facts = {
      {"alexnet", 0.714e9, {}},
      {"googlenet", 1.498e9, {}},
      {"inception_v3", 5.713e9, {{"aux_logits", "false"}}},
      {"resnet18", 1.814e9, {}},
      {"resnet34", 3.664e9, {}},
      {"resnet50", 4.089e9, {}},
      {"resnet101", 7.801e9, {}},
      {"resnet152", 11.514e9, {}},
      {"vgg11", 7.609e9, {}},
      {"vgg16", 15.47e9, {}},
      {"vgg19", 19.632e9, {}}};
  for (const auto& fact : facts) {
    const auto& name = std::get<0>(fact);  // CAPTURE needs a variable, not a binding
    const auto macs = std::get<1>(fact);
    const auto& set = std::get<2>(fact);
    CAPTURE(name);
    const double err = relative_error(stats(name, set).forward_macs, macs);
    CAPTURE(err);
    CHECK(err < 0.01);
  }
}

TEST_CASE("inception_v3_auxiliary_head_is_selectable") {
  CHECK(stats("inception_v3", {{"aux_logits", "false"}}).params == 23834568);
  CHECK(stats("inception_v3", {{"aux_logits", "true"}}).params == 27161264);
  const auto g = load_model("inception_v3");
  CHECK(g.layer(g.find("data").value()).output.shape == Shape{3, 299, 299});
}

TEST_CASE("transformer_parameter_counts_within_half_a_percent_of_reference") {
  // Reference figures (docs/model.md): Hugging Face BertForPreTraining 110,106,428 and
  // 336,226,108; GPT2LMHeadModel 124,439,808 and 354,823,168 (tied head).
  const std::vector<std::pair<std::string, double>> facts = {{"bert_base", 110106428},
                                                             {"bert_large", 336226108},
                                                             {"gpt2", 124439808},
                                                             {"gpt2_medium", 354823168}};
  for (const auto& fact : facts) {
    const auto& name = fact.first;  // CAPTURE needs a variable, not a binding (clang < 16)
    const auto params = fact.second;
    CAPTURE(name);
    const auto p = static_cast<double>(stats(name).params);
    CHECK(p == params);
  }
  // The model cards' round figures (110M, 340M, 124M, 355M), model_facts.csv.
  CHECK(relative_error(static_cast<double>(stats("bert_base").params), 110e6) < 0.005);
  CHECK(relative_error(static_cast<double>(stats("gpt2").params), 124e6) < 0.005);
  CHECK(relative_error(static_cast<double>(stats("gpt2_medium").params), 355e6) < 0.005);
}

TEST_CASE("sequence_length_is_a_model_parameter") {
  const auto short_seq = stats("bert_base", {{"seq_len", "128"}});
  const auto long_seq = stats("bert_base", {{"seq_len", "512"}});
  CHECK(short_seq.params == long_seq.params);
  // Dense work grows 4x; attention grows 16x, so the total grows by more than 4x.
  CHECK(long_seq.forward_macs > 4 * short_seq.forward_macs);
  const auto g = load_model("gpt2", {{"seq_len", "256"}});
  CHECK(g.layer(g.find("input_ids").value()).output.shape == Shape{256});
  CHECK_THROWS_WITH_AS(load_model("gpt2", {{"seq_len", "2048"}}),
                       doctest::Contains("exceeds the 1024 positions"), InputError);
  // The error names the user's value first: the model loads without it.
  CHECK_THROWS_WITH_AS(load_model("gpt2", {{"seq_len", "2048"}}),
                       doctest::Contains("set: seq_len=2048 does not fit model 'gpt2': "),
                       InputError);
  CHECK_THROWS_WITH_AS(load_model("bert_base", {{"seq_len", "0"}}),
                       doctest::Contains("dimensions must be positive, got 0"), InputError);
}

TEST_CASE("bert_base_forward_macs_follow_the_transformer_closed_form") {
  // Per layer: 4 d^2 S (Q, K, V, output) + 2 d S^2 (scores, context) + 8 d^2 S (feed-forward);
  // heads: pooler d^2 S, NSP 2 d S, MLM transform d^2 S and decoder d V S.
  const double d = 768, s = 128, v = 30522, layers = 12;
  const double expected =
      layers * (12 * d * d * s + 2 * d * s * s) + d * d * s + 2 * d * s + d * d * s + d * v * s;
  CHECK(stats("bert_base").forward_macs == dlsim_test::approx(expected));
}

TEST_CASE("parameters_carry_the_frameworks_names") {
  // The zoo's parameter_names give torchvision's names (resnet50's shortcut, alexnet's
  // Sequential indices) and Hugging Face BertForPreTraining's; the 398 of BERT-Large and the
  // 161 of resnet50 stay distinct, and a name no rule matches is LAYER.TENSOR.
  const auto names = [](const std::string& model) {
    std::set<std::string> out;
    for (const auto& g : analyze(load_model(model), 1, Precision::kFp32).gradients) {
      out.insert(g.parameter);
    }
    return out;
  };
  const auto bert = names("bert_large");
  CHECK(bert.size() == 398);
  CHECK(bert.count("bert.encoder.layer.23.attention.self.query.weight") == 1);
  CHECK(bert.count("bert.encoder.layer.0.output.LayerNorm.bias") == 1);
  CHECK(bert.count("bert.embeddings.word_embeddings.weight") == 1);
  CHECK(bert.count("cls.predictions.bias") == 1);
  const auto resnet = names("resnet50");
  CHECK(resnet.size() == 161);
  CHECK(resnet.count("layer1.0.downsample.0.weight") == 1);
  CHECK(resnet.count("layer4.0.downsample.1.bias") == 1);
  CHECK(resnet.count("fc.weight") == 1);
  CHECK(names("alexnet").count("classifier.6.bias") == 1);
  CHECK(names("vgg16").count("features.28.weight") == 1);
  CHECK(names("googlenet").count("inception5b.branch4.1.conv.weight") == 1);
}
