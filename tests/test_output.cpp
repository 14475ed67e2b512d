// write_output: what each kind of target gets (common/output.hpp).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "common/output.hpp"

namespace fs = std::filesystem;
using dlsim::write_output;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "dlsim-output-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Entries of `dir` other than `keep`: a failed or finished write leaves no temporary file.
int others(const fs::path& dir, const std::string& keep) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename() != keep;
  return n;
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode;
}

}  // namespace

TEST_CASE("a_new_file_appears_whole_with_the_mode_the_umask_gives") {
  TempDir d;
  const mode_t old = ::umask(022);
  write_output((d.path / "out.json").string(), "{}\n");
  ::umask(old);
  CHECK(read(d.path / "out.json") == "{}\n");
  CHECK((mode_of(d.path / "out.json") & 0777) == 0644);
  CHECK(others(d.path, "out.json") == 0);
}

TEST_CASE("an_existing_file_is_replaced_and_keeps_its_permissions") {
  TempDir d;
  const auto p = d.path / "report.md";
  std::ofstream(p) << "old contents, longer than the new ones\n";
  REQUIRE(::chmod(p.c_str(), 0640) == 0);
  write_output(p.string(), "new\n");
  CHECK(read(p) == "new\n");
  CHECK((mode_of(p) & 0777) == 0640);
  CHECK(others(d.path, "report.md") == 0);
}

TEST_CASE("a_symbolic_link_is_followed_and_stays_a_link") {
  TempDir d;
  const auto target = d.path / "real.txt";
  const auto link = d.path / "link.txt";
  std::ofstream(target) << "old\n";
  fs::create_symlink("real.txt", link);  // relative, as users make them
  write_output(link.string(), "through the link\n");
  CHECK(fs::is_symlink(link));
  CHECK(read(target) == "through the link\n");

  // A dangling link creates its target.
  const auto dangling = d.path / "dangling.txt";
  fs::create_symlink("made.txt", dangling);
  write_output(dangling.string(), "made\n");
  CHECK(fs::is_symlink(dangling));
  CHECK(read(d.path / "made.txt") == "made\n");
}

TEST_CASE("a_character_device_is_written_through_and_never_replaced") {
  write_output("/dev/null", "discarded\n");
  CHECK(S_ISCHR(mode_of("/dev/null")));
}

TEST_CASE("a_full_device_is_one_error_naming_it") {
  if (!fs::exists("/dev/full")) return;
  CHECK_THROWS_WITH_AS(write_output("/dev/full", std::string(1 << 16, 'x')),
                       doctest::Contains("/dev/full: writing failed: No space left on device"),
                       dlsim::InputError);
  CHECK(S_ISCHR(mode_of("/dev/full")));
}

TEST_CASE("a_fifo_is_written_through") {
  TempDir d;
  const auto fifo = d.path / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  write_output(fifo.string(), "down the pipe\n");
  reader.join();
  CHECK(got == "down the pipe\n");
  CHECK(S_ISFIFO(mode_of(fifo)));
}

TEST_CASE("a_directory_or_a_missing_folder_is_an_error_and_leaves_nothing") {
  TempDir d;
  CHECK_THROWS_WITH_AS(write_output(d.path.string(), "x"), doctest::Contains("is a directory"),
                       dlsim::InputError);
  const std::string missing = "the folder " + (d.path / "no" / "such").string() + " does not exist";
  CHECK_THROWS_WITH_AS(write_output((d.path / "no" / "such" / "out.json").string(), "x"),
                       doctest::Contains(missing.c_str()), dlsim::InputError);
  CHECK(others(d.path, "") == 0);
}

TEST_CASE("an_unwritable_folder_leaves_the_old_file_as_it_was") {
  if (::geteuid() == 0) return;  // root writes anywhere
  TempDir d;
  const auto p = d.path / "keep.txt";
  std::ofstream(p) << "kept\n";
  REQUIRE(::chmod(d.path.c_str(), 0500) == 0);
  CHECK_THROWS_AS(write_output(p.string(), "lost"), dlsim::InputError);
  REQUIRE(::chmod(d.path.c_str(), 0700) == 0);
  CHECK(read(p) == "kept\n");
}
