#include "common/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "common/error.hpp"

namespace dlsim {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_errno(const std::string& path, const std::string& what, int err) {
  fail_at({path}, "", what + ": " + std::strerror(err));
}

// Writes all of `content` to `fd`, retrying short writes and EINTR; the errno of a failure.
int write_all(int fd, const std::string& content) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

// The path a chain of symbolic links ends at (the last one may point to nothing yet).
fs::path follow_links(const std::string& path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) fail_at({path}, "", "cannot read the symbolic link: " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  fail_at({path}, "", "too many levels of symbolic links");
}

mode_t current_umask() {
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

void write_through(const std::string& shown, const fs::path& target, const std::string& content) {
  const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail_errno(shown, "cannot open for writing", errno);
  const int err = write_all(fd, content);
  const int close_err = ::close(fd) != 0 ? errno : 0;
  if (err != 0) fail_errno(shown, "writing failed", err);
  if (close_err != 0 && close_err != EINTR) fail_errno(shown, "writing failed", close_err);
}

// One output on its way: where it goes and, for a regular file, the temporary file beside it
// that already holds the content (synced, given its mode), to be renamed over the target.
struct Pending {
  enum class Kind { kStdout, kThrough, kAtomic } kind = Kind::kStdout;
  std::string shown;
  fs::path target;
  std::string tmp;
  const std::string* content = nullptr;
};

void discard(const Pending& p) {
  if (!p.tmp.empty()) ::unlink(p.tmp.c_str());
}

// Writes the temporary file of an atomic output: beside the target, synced, given the replaced
// file's mode (or a plain creation's).
void prepare_atomic(Pending& p, const struct stat* existing) {
  const fs::path dir = p.target.has_parent_path() ? p.target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + p.target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::error_code ec;
    if (err == ENOENT && !fs::is_directory(dir, ec)) {
      fail_at({p.shown}, "", "the folder " + dir.string() + " does not exist");
    }
    // The content goes to a new file beside the target, renamed over it once complete; a file
    // system that refuses new files (/proc, /sys) cannot take it.
    fail_errno(p.shown,
               existing ? "cannot replace it: no new file can be made beside it in " + dir.string()
                        : "cannot create a file in " + dir.string(),
               err);
  }
  auto give_up = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail_errno(p.shown, what, err);
  };
  if (int err = write_all(fd, *p.content)) give_up("writing failed", err);
  if (::fsync(fd) != 0) give_up("writing failed", errno);
  // mkostemp makes the file 0600; take the replaced file's mode and owner, or what a plain
  // creation under the umask would give.
  const mode_t mode = existing ? (existing->st_mode & 07777) : (0666 & ~current_umask());
  if (::fchmod(fd, mode) != 0) give_up("cannot set the file's permissions", errno);
  if (existing && (existing->st_uid != ::geteuid() || existing->st_gid != ::getegid())) {
    // Only root may give a file away; for others the new file is theirs, as with any rewrite.
    [[maybe_unused]] const int ignored = ::fchown(fd, existing->st_uid, existing->st_gid);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_errno(p.shown, "writing failed", err);
  }
  p.tmp = tmp;
}

// Decides where `path` goes and, for a regular file, writes its temporary file.
Pending prepare(const std::string& path, const std::string& content) {
  Pending p;
  p.shown = path;
  p.content = &content;
  if (path.empty() || path == "-") return p;
  p.target = follow_links(path);
  struct stat st {};
  if (::stat(p.target.c_str(), &st) != 0) {
    if (errno != ENOENT) fail_errno(path, "cannot write there", errno);
    p.kind = Pending::Kind::kAtomic;
    prepare_atomic(p, nullptr);
  } else if (S_ISREG(st.st_mode)) {
    p.kind = Pending::Kind::kAtomic;
    prepare_atomic(p, &st);
  } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    p.kind = Pending::Kind::kThrough;
  } else if (S_ISDIR(st.st_mode)) {
    fail_at({path}, "", "is a directory; name a file");
  } else if (S_ISBLK(st.st_mode)) {
    fail_at({path}, "", "is a block device; dlsim does not write to disks directly");
  } else {
    fail_at({path}, "", "is neither a file, a character device nor a pipe");
  }
  return p;
}

// Puts a prepared output in place: the rename (and the folder synced, so it survives a crash),
// or the write through to standard output, a device or a pipe.
void commit(Pending& p) {
  switch (p.kind) {
    case Pending::Kind::kStdout:
      std::cout << *p.content << std::flush;
      if (!std::cout) fail_at({"standard output"}, "", "writing failed");
      return;
    case Pending::Kind::kThrough:
      write_through(p.shown, p.target, *p.content);
      return;
    case Pending::Kind::kAtomic:
      break;
  }
  if (::rename(p.tmp.c_str(), p.target.c_str()) != 0) {
    const int err = errno;
    discard(p);
    fail_errno(p.shown, "cannot move the output into place", err);
  }
  p.tmp.clear();
  const fs::path dir = p.target.has_parent_path() ? p.target.parent_path() : fs::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some file systems refuse fsync on a folder
    ::close(dfd);
  }
}

}  // namespace

AppendFile::AppendFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) fail_errno(path, "cannot open for appending", errno);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(const std::string& record) {
  if (int err = write_all(fd_, record)) fail_errno(path_, "writing failed", err);
  // Devices and pipes cannot be synced (EINVAL); a regular file's record is on disk after this.
  if (::fdatasync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
    fail_errno(path_, "writing failed", errno);
  }
}

std::vector<std::string> file_references(const std::vector<std::string>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs) {
    if (r.find('/') != std::string::npos || r.ends_with(".yaml") || r.ends_with(".yml") ||
        r.ends_with(".onnx")) {
      out.push_back(r);
    }
  }
  return out;
}

void refuse_repeated_inputs(const std::vector<std::string>& inputs, const std::string& field,
                            const std::string& why) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (fs::equivalent(inputs[i], inputs[j], ec) && !ec) {
        fail_at({inputs[i]}, field, "given twice (" + why + ")");
      }
    }
  }
}

void refuse_output_over_input(const std::string& output, const std::vector<std::string>& inputs) {
  if (output.empty() || output == "-") return;
  std::error_code ec;
  // Only a regular file is replaced; a device (/dev/null) or a pipe is written through.
  if (!fs::is_regular_file(output, ec)) return;
  for (const auto& input : inputs) {
    if (input.empty() || input == "-") continue;
    if (fs::equivalent(output, input, ec) && !ec) {
      fail_at({output}, "",
              input == output
                  ? "is also an input of this command: writing it would replace what was read; "
                    "name another output"
                  : fmt::format("is the input {}: writing it would replace what was read; name "
                                "another output",
                                input));
    }
  }
}

void write_output(const std::string& path, const std::string& content,
                  const std::vector<std::string>& inputs) {
  write_outputs({{path, content}}, inputs);
}

void write_outputs(const std::vector<std::pair<std::string, std::string>>& files,
                   const std::vector<std::string>& inputs) {
  for (const auto& f : files) refuse_output_over_input(f.first, inputs);
  // Two outputs to one file: one would overwrite the other ("-", standard output, may repeat).
  for (std::size_t i = 0; i < files.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const auto& a = files[i].first;
      const auto& b = files[j].first;
      if (a.empty() || a == "-" || b.empty() || b == "-") continue;
      std::error_code ec;
      // A device (/dev/null) takes any number of outputs.
      if (std::filesystem::exists(a, ec) && !std::filesystem::is_regular_file(a, ec)) continue;
      // Absolute first: weakly_canonical leaves a relative path whose first part does not exist
      // as it is ("a.txt" against "./a.txt").
      const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec), ec);
      const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec), ec);
      if (a == b || (!ca.empty() && ca == cb)) {
        fail_at({a}, "", "two of the outputs would be written to this one file");
      }
    }
  }
  std::vector<Pending> pending;
  pending.reserve(files.size());
  try {
    for (const auto& [path, content] : files) pending.push_back(prepare(path, content));
    for (auto& p : pending) commit(p);
  } catch (...) {
    for (const auto& p : pending) discard(p);
    throw;
  }
}

}  // namespace dlsim
