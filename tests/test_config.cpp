#include <doctest/doctest.h>

#include <filesystem>
#include "approx.hpp"

#include "common/config.hpp"

using namespace dlsim;

TEST_CASE("typed_reads_return_values_and_defaults") {
  const auto root = ConfigNode::load_string("a: 3\nb: 2.5\nc: true\nd: [1, 7]\n", "t.yaml");
  CHECK(root.get<int>("a") == 3);
  CHECK(root.get<double>("b") == dlsim_test::approx(2.5));
  CHECK(root.get<bool>("c"));
  CHECK(root.child("d").as_int_list() == std::vector<std::int64_t>{1, 7});
  CHECK(root.get_or<int>("e", 9) == 9);
  CHECK_NOTHROW(root.finish());
}

TEST_CASE("an_unknown_key_names_file_line_and_the_nearest_known_key") {
  const auto root = ConfigNode::load_string("kernel: 3\nstrid: 2\n", "net.yaml");
  root.get<int>("kernel");
  root.get_or<int>("stride", 1);
  CHECK_THROWS_WITH_AS(root.finish(), "net.yaml:2:1: unknown key 'strid'; did you mean 'stride'?",
                       InputError);
}

TEST_CASE("a_missing_key_and_a_wrong_type_name_the_field") {
  const auto root = ConfigNode::load_string("layer:\n  size: big\n", "m.yaml");
  CHECK_THROWS_WITH_AS(root.child("layer").get<int>("size"),
                       "m.yaml:2:9: 'layer.size': expected an integer, got 'big'", InputError);
  CHECK_THROWS_WITH_AS(root.child("layer").get<int>("depth"),
                       "m.yaml:2:3: 'layer': missing required key 'depth'", InputError);
}

TEST_CASE("malformed_yaml_is_an_input_error_with_a_line") {
  CHECK_THROWS_WITH_AS(ConfigNode::load_string("a: [1, 2\nb: 3\n", "bad.yaml"),
                       doctest::Contains("bad.yaml:"), InputError);
  CHECK_THROWS_WITH_AS(ConfigNode::load_file("/nonexistent/x.yaml"),
                       "/nonexistent/x.yaml: cannot open file", InputError);
}

TEST_CASE("a_key_given_twice_in_one_mapping_is_an_error_at_its_second_place") {
  // yaml-cpp keeps both and reads the first: the second value would never be read or checked.
  CHECK_THROWS_WITH_AS(ConfigNode::load_string("nodes: 16\nname: c\nnodes: 8\n", "c.yaml"),
                       "c.yaml:3:1: 'nodes': given twice in one mapping (first at line 1)",
                       InputError);
  CHECK_THROWS_WITH_AS(
      ConfigNode::load_string("layers:\n  - {name: a, out: 64, out: -5}\n", "m.yaml"),
      "m.yaml:2:24: 'out': given twice in one mapping (first at line 2)", InputError);
  // The same key in different mappings is fine.
  CHECK_NOTHROW(ConfigNode::load_string("a: {x: 1}\nb: {x: 2}\n", "ok.yaml"));
}

TEST_CASE("a_second_yaml_document_is_an_error_not_dropped") {
  CHECK_THROWS_WITH_AS(ConfigNode::load_string("a: 1\n---\nb: 2\n", "two.yaml"),
                       "two.yaml:3:1: a second YAML document: a file holds one (remove the '---' "
                       "and what follows, or merge it into the first)",
                       InputError);
  CHECK(ConfigNode::load_string("---\na: 1\n", "one.yaml").get<int>("a") == 1);
  CHECK_THROWS_WITH_AS(ConfigNode::load_string(" a: 1\nb: 2\n", "dedent.yaml"),
                       "dedent.yaml:2:1: a second YAML document starts here, without a '---' "
                       "(after a '...', or at a line indented less than the file's first): a "
                       "file holds one (indent the lines alike)",
                       InputError);
  // Two empty documents are two documents too.
  CHECK_THROWS_WITH_AS(ConfigNode::load_string("---\n---\n", "empty.yaml"),
                       doctest::Contains("empty.yaml:3:1: a second YAML document"), InputError);
}

TEST_CASE("a_comma_outside_a_flow_collection_is_malformed_yaml_not_an_endless_loop") {
  // yaml-cpp 0.7's LoadAll returns an empty document at such a ',' for ever (jbeder/yaml-cpp
  // #1040); found by fuzzing the hardware loader, where it ran until memory ran out.
  CHECK_THROWS_WITH_AS(ConfigNode::load_string(" a:\n,\n", "c.yaml"),
                       "c.yaml:2:1: malformed YAML: unexpected ','", InputError);
  CHECK_THROWS_WITH_AS(ConfigNode::load_string(",", "c.yaml"),
                       "c.yaml:1:1: malformed YAML: unexpected ','", InputError);
  CHECK_THROWS_WITH_AS(ConfigNode::load_string("  gpu:\n ,   extends: x\n", "c.yaml"),
                       "c.yaml:2:2: malformed YAML: unexpected ','", InputError);
}

TEST_CASE("a_directory_is_not_a_file") {
  const auto dir = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH_AS(ConfigNode::load_file(dir), doctest::Contains("is a directory, not a file"),
                       InputError);
  // A device would be read without end (/dev/zero) or block on a terminal.
  CHECK_THROWS_WITH_AS(ConfigNode::load_file("/dev/zero"),
                       doctest::Contains("/dev/zero: is a device, not a file"), InputError);
}

TEST_CASE("parameter_references_resolve_through_scopes") {
  auto outer = std::make_shared<ParamScope>();
  outer->set("classes", YAML::Node(1000));
  auto inner = std::make_shared<ParamScope>(outer);
  inner->set("k", YAML::Node(7));
  inner->set("k", YAML::Node(5));  // a later binding replaces the earlier one
  const auto root = ConfigNode::load_string("out: $classes\nkernel: [1, $k]\nx: $nope\n", "p.yaml")
                        .with_scope(inner);
  CHECK(root.get<int>("out") == 1000);
  CHECK(root.child("kernel").as_int_list() == std::vector<std::int64_t>{1, 5});
  CHECK_THROWS_WITH_AS(root.get<int>("x"), doctest::Contains("unknown parameter '$nope'"),
                       InputError);
}
