#pragma once
// Relative floating-point comparison for the test suites. doctest::Approx accepts
// |a - b| < epsilon x (scale + max(|a|, |b|)) with scale 1, so for values far below 1 (times in
// seconds, rates in B/ns) its tolerance is an absolute epsilon (about 1.2e-5 by default) and
// almost any value passes. approx() sets scale 0: the tolerance is relative to the values
// compared. A comparison with an exact zero needs its own absolute `.scale(...)`.

#include <doctest/doctest.h>

namespace dlsim_test {

inline doctest::Approx approx(double value) { return doctest::Approx(value).scale(0); }

}  // namespace dlsim_test
