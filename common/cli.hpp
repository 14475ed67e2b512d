#pragma once
// Running a dlsim program's command line, the same way for dlsim, dlcalibrate and dlvalidate:
// --help and --version exit 0; a parse error or an InputError is one line "PROGRAM: error: ..."
// and exit code 2; anything else is "PROGRAM: internal error: ..." and exit code 3.

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

#include "common/error.hpp"

namespace dlsim {

// `parse(text)` for the value of `flag`; its std::invalid_argument becomes an InputError
// naming the flag.
template <class Parse>
auto parse_flag(const std::string& text, const std::string& flag, Parse parse) {
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    fail_at({}, flag, e.what());
  }
}

// Parses and runs `app` (its callbacks do the work); 0 when they all finished.
inline int run_cli(CLI::App& app, int argc, char** argv, const std::string& program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << e.what() << " (see " << program << " --help)\n";
    return 2;
  } catch (const InputError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}

}  // namespace dlsim
