# The two commands: `make run` and `make test`. Both install missing Debian packages first
# (through sudo when not root), then build with CMake. See README.md.
PKGS := cmake g++ make pkg-config libasio-dev libspdlog-dev libprotobuf-dev protobuf-compiler \
        librocksdb-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libtoml11-dev librabbitmq-dev libjemalloc-dev \
        libcpp-httplib-dev libcli11-dev nlohmann-json3-dev libsystemd-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JOBS ?= $(shell nproc)

.PHONY: deps build run test test-build bench clean format

deps:
	@missing=$$(for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# Release build: wharfd, wharfctl, wharf-perf, benchmarks.
build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWHARF_BUILD_TESTS=OFF -DWHARF_BUILD_BENCH=ON
	cmake --build build -j $(JOBS)

run: build
	mkdir -p data
	exec build/src/server/wharfd --config config/wharfd.toml --data-dir ./data

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer.
test-build: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWHARF_SANITIZE=address,undefined \
	  -DWHARF_BUILD_TESTS=ON -DWHARF_BUILD_BENCH=OFF
	cmake --build build-asan -j $(JOBS)

test: test-build
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 300

bench: build
	@ls build/bench

format:
	find src include tests bench \( -name "*.h" -o -name "*.cc" \) -print0 | xargs -0 clang-format -i

clean:
	rm -rf build build-asan
