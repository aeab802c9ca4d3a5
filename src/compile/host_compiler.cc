#include "compile/host_compiler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "fmt/format.h"

#include "base/file.h"
#include "base/status_macros.h"
#include "compile/internal/scratch_directory.h"

extern char** environ;

namespace switchyard::compile {
namespace {

// Runs argv (through the PATH) with stdout and stderr into `log`; its exit status, or -1
// when it did not start or ended by a signal.
int Run(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The first `lines` lines of `text`.
std::string Head(const std::string& text, int lines) {
  size_t end = 0;
  for (int i = 0; i < lines; ++i) {
    end = text.find('\n', end);
    if (end == std::string::npos)
      return text;
    if (i + 1 < lines)
      ++end;
  }
  return text.substr(0, end);
}

absl::StatusOr<std::vector<std::string>> IsaFlags(std::string_view isa) {
  if (isa == "portable")
    return std::vector<std::string>{};
  std::vector<std::string> flags = {"-mavx2", "-mfma", "-mf16c"};
  if (isa == "avx2")
    return flags;
  if (isa == "avx512") {
    for (const char* f : {"-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"})
      flags.emplace_back(f);
    return flags;
  }
  return absl::InvalidArgumentError(fmt::format("no compiler flags for the ISA level {}", isa));
}

}  // namespace

absl::StatusOr<HostCompiler> FindHostCompiler(std::string_view isa) {
  HostCompiler compiler;
  const char* named = std::getenv("SWITCHYARD_CXX");
  compiler.command = named != nullptr && *named != '\0' ? named : "c++";
  SY_ASSIGN_OR_RETURN(std::vector<std::string> isa_flags, IsaFlags(isa));
  compiler.flags = {"-std=c++17",     "-O3", "-fPIC", "-shared", "-ffp-contract=off",
                    "-fno-math-errno"};
  compiler.flags.insert(compiler.flags.end(), isa_flags.begin(), isa_flags.end());
  SY_ASSIGN_OR_RETURN(internal::ScratchDirectory scratch, internal::ScratchDirectory::Create());
  const std::string log = scratch.File("version.txt");
  if (Run({compiler.command, "--version"}, log) != 0) {
    return absl::NotFoundError(fmt::format(
        "the C++ compiler `{}` does not run (set SWITCHYARD_CXX to another)", compiler.command));
  }
  SY_ASSIGN_OR_RETURN(const std::string version, base::ReadFile(log));
  compiler.version = Head(version, 1);
  return compiler;
}

absl::StatusOr<std::string> BuildSharedObject(const HostCompiler& compiler,
                                              std::string_view source) {
  SY_ASSIGN_OR_RETURN(internal::ScratchDirectory scratch, internal::ScratchDirectory::Create());
  const std::string source_path = scratch.File("kernels.cc");
  const std::string object_path = scratch.File("kernels.so");
  const std::string log = scratch.File("build.log");
  SY_RETURN_IF_ERROR(base::WriteFile(source_path, source));
  std::vector<std::string> args = {compiler.command};
  args.insert(args.end(), compiler.flags.begin(), compiler.flags.end());
  args.insert(args.end(), {source_path, "-o", object_path});
  if (Run(args, log) != 0) {
    const absl::StatusOr<std::string> diagnostics = base::ReadFile(log);
    return absl::InternalError(fmt::format(
        "`{}` failed to build generated kernels: {}", compiler.command,
        diagnostics.ok() && !diagnostics->empty() ? Head(*diagnostics, 5) : "(no output)"));
  }
  return base::ReadFile(object_path);
}

}  // namespace switchyard::compile
