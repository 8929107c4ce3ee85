#include "server/process_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>

namespace wharf::server {
namespace {

uint64_t PageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

// /proc/stat's btime: the boot time, seconds since the epoch.
uint64_t BootTime() {
  std::ifstream stat("/proc/stat");
  std::string key;
  uint64_t value = 0;
  while (stat >> key) {
    if (key == "btime") {
      stat >> value;
      return value;
    }
    stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// /proc/self/statm's first two fields, in bytes: the virtual and the resident size.
struct Statm {
  uint64_t virtual_bytes = 0;
  uint64_t resident_bytes = 0;
};
Statm ReadStatm() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return {size * PageSize(), resident * PageSize()};
}

}  // namespace

uint64_t ResidentBytes() { return ReadStatm().resident_bytes; }

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  Statm statm = ReadStatm();
  stats.virtual_bytes = statm.virtual_bytes;
  stats.resident_bytes = statm.resident_bytes;
  {
    // /proc/self/stat: "pid (comm) state ..." where comm may hold spaces and parentheses:
    // the fields that follow start after the last ')'. utime and stime are fields 14 and 15,
    // starttime field 22, in clock ticks (proc(5)).
    std::ifstream in("/proc/self/stat");
    std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream fields(line.substr(close + 1));
      std::string field;
      uint64_t utime = 0, stime = 0, starttime = 0;
      for (int i = 3; fields >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
        if (i == 22) {
          starttime = std::stoull(field);
          break;
        }
      }
      const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
      stats.cpu_seconds = static_cast<double>(utime + stime) / ticks;
      stats.start_time_seconds = static_cast<double>(BootTime()) + starttime / ticks;
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++stats.open_fds;
  }
  if (stats.open_fds > 0) --stats.open_fds;  // the directory listing's own descriptor
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) stats.max_fds = files.rlim_cur;
  return stats;
}

}  // namespace wharf::server
