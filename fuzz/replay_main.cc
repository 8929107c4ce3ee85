// fuzz/replay_main.cc
//
// A main for the fuzz targets in builds without libFuzzer (GCC, the test suite): runs
// LLVMFuzzerTestOneInput once on every file named, or in a directory named, on the command
// line. ctest runs each target over its seed corpus and its kept crash inputs (fuzz/regressions),
// so an input that once crashed a decoder is replayed under ASan+UBSan on every test run.
// A crash is the test's failure; an empty directory is not (the regressions may be none).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as in libFuzzer: a target's one-time set-up (quiet_protobuf.h).
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code error;
    if (std::filesystem::is_directory(arg, error)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        // Dot files are not inputs (.gitkeep keeps an empty regressions directory in git).
        if (entry.is_regular_file() && !entry.path().filename().string().starts_with(".")) {
          files.push_back(entry.path());
        }
      }
      std::sort(files.begin(), files.end());
      for (const auto& file : files) {
        if (!RunFile(file)) return 1;
        ++inputs;
      }
    } else if (std::filesystem::exists(arg, error)) {
      if (!RunFile(arg)) return 1;
      ++inputs;
    } else {
      std::fprintf(stderr, "no such file or directory: %s\n", argv[i]);
      return 1;
    }
  }
  std::printf("%zu inputs replayed\n", inputs);
  return 0;
}
