#include <doctest/doctest.h>

#include "approx.hpp"

#include <stdexcept>

#include "common/collective_op.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

using namespace dlsim;

TEST_CASE("byte_sizes_parse_decimal_and_binary_prefixes") {
  CHECK(parse_bytes("16GiB").value() == dlsim_test::approx(16.0 * 1024 * 1024 * 1024));
  CHECK(parse_bytes("16GB").value() == dlsim_test::approx(16e9));
  CHECK(parse_bytes("512 KiB").value() == dlsim_test::approx(512.0 * 1024));
}

TEST_CASE("bandwidth_distinguishes_bits_from_bytes") {
  CHECK(parse_bandwidth("900GB/s").value() == dlsim_test::approx(900e9));
  CHECK(parse_bandwidth("25Gbit/s").value() == dlsim_test::approx(25e9 / 8));
  CHECK(parse_bandwidth("100Gb/s").value() == dlsim_test::approx(12.5e9));
}

TEST_CASE("durations_and_compute_rates_parse_with_their_units") {
  CHECK(parse_seconds("2.5us").value() == dlsim_test::approx(2.5e-6));
  CHECK(parse_seconds("500ns").value() == dlsim_test::approx(5e-7));
  CHECK(parse_flop_rate("15.7TFLOP/s").value() == dlsim_test::approx(15.7e12));
}

TEST_CASE("a_bare_number_for_a_dimensioned_value_is_rejected") {
  CHECK_THROWS_WITH_AS(parse_bytes("16"), doctest::Contains("has no unit"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_bandwidth("10GiB"), doctest::Contains("unknown unit 'GiB'"),
                       std::invalid_argument);
  CHECK_THROWS_AS(parse_seconds("fast"), std::invalid_argument);
}

TEST_CASE("quantities_combine_only_with_matching_units") {
  const Seconds t = Bytes(1e9) / Bandwidth(1e10);
  CHECK(t.value() == dlsim_test::approx(0.1));
  const Seconds c = Flops(2e12) / FlopRate(1e12);
  CHECK(c.value() == dlsim_test::approx(2.0));
  CHECK((Bytes(3) + Bytes(4)).value() == 7);
  CHECK(format_bytes(Bytes(1.5 * 1024 * 1024 * 1024)) == "1.5 GiB");
  CHECK(format_seconds(Seconds(2.5e-6)) == "2.5 us");
}

TEST_CASE("the_largest_accepted_values_print_with_their_own_prefix") {
  // kMaxBytes is 2^60 B, one EiB; kMaxFlopRate 1e21 FLOP/s, one ZFLOP/s.
  CHECK(format_bytes(kMaxBytes) == "1 EiB");
  CHECK(format_bytes(Bytes(1024.0 * 1024 * 1024 * 1024 * 1024)) == "1 PiB");
  CHECK(format_flop_rate(kMaxFlopRate) == "1 ZFLOP/s");
  CHECK(format_bandwidth(kMaxBandwidth) == "1 PB/s");
}

TEST_CASE("nccl_tests_count_column_is_per_rank_for_gathers_and_scatters") {
  // nccl-tests (src/*.cu, *GetCollByteCount): the whole buffer for allreduce, broadcast and
  // reduce; each rank's share for allgather and reducescatter; each peer's for alltoall.
  CHECK(count_elements(CollectiveOp::kAllReduce, 1024, 8) == 256);
  CHECK(count_elements(CollectiveOp::kBroadcast, 1024, 8) == 256);
  CHECK(count_elements(CollectiveOp::kReduce, 1024, 8) == 256);
  CHECK(count_elements(CollectiveOp::kReduceScatter, 1024, 8) == 32);
  CHECK(count_elements(CollectiveOp::kAllGather, 1024, 8) == 32);
  CHECK(count_elements(CollectiveOp::kAllToAll, 1024, 8) == 32);
  CHECK(count_elements(CollectiveOp::kReduceScatter, 31, 8) == 0);
  CHECK(count_elements(CollectiveOp::kAllReduce, 3, 8) == 0);
}

TEST_CASE("nearest_names_suggest_close_spellings_first") {
  const std::vector<std::string> known = {"googlenet", "resnet50", "resnet101", "vgg16"};
  const auto near = nearest_names("googlenett", known);
  REQUIRE(!near.empty());
  CHECK(near.front() == "googlenet");
  CHECK(did_you_mean("resnet5", known).find("'resnet50'") != std::string::npos);
  CHECK(did_you_mean("transformerxl", known).empty());
}
