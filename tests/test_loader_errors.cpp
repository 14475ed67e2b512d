// Bad model files: one clear message naming the file, the line and the problem.

#include <doctest/doctest.h>

#include "model/analysis.hpp"
#include "model/loader.hpp"

using namespace dlsim;
using namespace dlsim::model;

namespace {

void load(const std::string& yaml) { load_yaml_model(ConfigNode::load_string(yaml, "bad.yaml")); }

}  // namespace

TEST_CASE("unknown_model_name_suggests_the_nearest_zoo_names") {
  CHECK_THROWS_WITH_AS(load_model("resnet5"),
                       doctest::Contains("unknown model 'resnet5'; did you mean 'resnet50'"),
                       InputError);
  CHECK_THROWS_WITH_AS(load_model("no/such/file.yaml"), doctest::Contains("no such file"),
                       InputError);
}

TEST_CASE("a_key_the_schema_does_not_know_is_named_with_its_line") {
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {op: input, shape: [3, 8, 8]}
  - {op: conv2d, out_channels: 4, kernel: 3, strid: 2}
)"),
                       "bad.yaml:4:46: 'layers[1]': unknown key 'strid'; did you mean 'stride'?",
                       InputError);
  CHECK_THROWS_WITH_AS(load("name: t\nlayer: []\n"),
                       doctest::Contains("missing required key 'layers'"), InputError);
  CHECK_THROWS_WITH_AS(load("name: t\nlayers: []\nextra: 1\n"),
                       doctest::Contains("bad.yaml:3:1: unknown key 'extra'"), InputError);
  // A misspelt 'params' is named as such, not as the parameter a layer then misses.
  CHECK_THROWS_WITH_AS(load(R"(name: t
paramz: {c: 4}
layers:
  - {op: input, shape: [3, 8, 8]}
  - {op: conv2d, out_channels: $c, kernel: 3}
)"),
                       "bad.yaml:2:1: unknown key 'paramz'; did you mean 'params'?", InputError);
}

TEST_CASE("a_missing_field_is_named") {
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {op: input, shape: [3, 8, 8]}
  - {op: conv2d, kernel: 3}
)"),
                       "bad.yaml:4:5: 'layers[1]': missing required key 'out_channels'",
                       InputError);
}

TEST_CASE("concat_of_different_spatial_sizes_is_rejected_at_its_line") {
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {name: x, op: input, shape: [3, 8, 8]}
  - {name: a, op: conv2d, out_channels: 4, kernel: 3, padding: 1}
  - {name: b, op: conv2d, input: x, out_channels: 4, kernel: 3, stride: 2, padding: 1}
  - {name: cat, op: concat, inputs: [a, b]}
)"),
                       doctest::Contains("bad.yaml:6:5: layer 'cat' (concat): concat along axis 0: "
                                         "inputs differ elsewhere: [4, 8, 8] vs [4, 4, 4]"),
                       InputError);
}

TEST_CASE("add_of_different_channels_is_rejected") {
  CHECK_THROWS_WITH_AS(
      load(R"(name: t
layers:
  - {name: x, op: input, shape: [3, 8, 8]}
  - {name: a, op: conv2d, out_channels: 4, kernel: 1}
  - {name: sum, op: add, inputs: [a, x]}
)"),
      doctest::Contains("layer 'sum' (add): add: input shapes differ: [4, 8, 8] vs "
                        "[3, 8, 8]"),
      InputError);
}

TEST_CASE("a_cycle_is_rejected_naming_the_layers") {
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {name: x, op: input, shape: [4]}
  - {name: a, op: add, inputs: [x, b]}
  - {name: b, op: relu, input: a}
)"),
                       doctest::Contains("the model has a cycle"), InputError);
}

TEST_CASE("references_blocks_and_parameters_are_checked") {
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {name: x, op: input, shape: [4]}
  - {name: y, op: relu, input: z}
)"),
                       doctest::Contains("bad.yaml:4:32: no layer named 'z' in this list"),
                       InputError);
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {name: x, op: input, shape: [4]}
  - {name: y, op: reluu}
)"),
                       doctest::Contains("unknown operator 'reluu'; did you mean 'relu'"),
                       InputError);
  CHECK_THROWS_WITH_AS(load(R"(name: t
blocks:
  fc: {params: {n: ~}, layers: [{op: linear, out_features: $n}]}
layers:
  - {name: x, op: input, shape: [4]}
  - {name: y, block: fc}
)"),
                       doctest::Contains("block 'fc' needs argument 'n'"), InputError);
  CHECK_THROWS_WITH_AS(load(R"(name: t
layers:
  - {name: x, op: input, shape: [4]}
  - {name: y, op: linear, out_features: $width}
)"),
                       doctest::Contains("unknown parameter '$width'"), InputError);
  CHECK_THROWS_WITH_AS(load_model("gpt2", {{"seqlen", "64"}}),
                       doctest::Contains("has no parameter 'seqlen'; did you mean 'seq_len'"),
                       InputError);
}

TEST_CASE("blocks_instantiate_with_arguments_repeats_and_first_overrides") {
  const auto g = load_yaml_model(ConfigNode::load_string(R"(name: t
blocks:
  fc: {params: {n: ~, act: true}, layers: [{name: l, op: linear, out_features: $n}, {name: r, op: relu, if: $act}]}
layers:
  - {name: x, op: input, shape: [4]}
  - {name: s, block: fc, repeat: 3, n: 8, first: {n: 16, act: false}}
  - {name: out, op: linear, input: s, out_features: 2}
)",
                                                         "ok.yaml"));
  CHECK(g.find("s.0.l").has_value());
  CHECK(!g.find("s.0.r").has_value());
  CHECK(g.find("s.2.r").has_value());
  CHECK(g.layer(*g.find("s.0.l")).output.shape == Shape{16});
  CHECK(g.layer(*g.find("s.1.l")).output.shape == Shape{8});
  const auto& out = g.layer(*g.find("out"));
  REQUIRE(out.inputs.size() == 1);
  CHECK(g.layer(out.inputs[0]).name == "s.2.r");
}

TEST_CASE("a_negative_or_zero_batch_is_rejected") {
  const auto g = load_model("alexnet");
  CHECK_THROWS_WITH_AS(analyze(g, 0, Precision::kFp32), "batch: must be a positive integer, got 0",
                       InputError);
  CHECK_THROWS_AS(analyze(g, -4, Precision::kFp32), InputError);
}

TEST_CASE("malformed_yaml_names_the_line") {
  CHECK_THROWS_WITH_AS(load("name: t\nlayers: [\n  {op: input\n"), doctest::Contains("bad.yaml:"),
                       InputError);
}
