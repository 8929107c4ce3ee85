# The two commands: `make run` and `make test`. Both install missing Debian packages first
# (through sudo when not root), then build with CMake. See README.md.
PKGS := cmake g++ make pkg-config libasio-dev libspdlog-dev libprotobuf-dev protobuf-compiler \
        librocksdb-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libtoml11-dev librabbitmq-dev libjemalloc-dev \
        libcpp-httplib-dev libcli11-dev nlohmann-json3-dev libsystemd-dev dpkg-dev file \
        python3 python3-pika python3-kombu golang-go golang-github-rabbitmq-amqp091-go-dev openssl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JOBS ?= $(shell nproc)

.PHONY: deps build build-default package run test test-build bench clean format

deps:
	@missing=$$(for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@# Node and npm (the README's Node quick start test): any installed ones, else Debian's.
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }

# Release build: wharfd, wharfctl, wharf-perf, benchmarks. The Makefile's builds treat
# warnings as errors (WHARF_WERROR); a plain CMake build does not.
build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWHARF_BUILD_TESTS=OFF -DWHARF_BUILD_BENCH=ON \
	  -DWHARF_WERROR=ON
	cmake --build build -j $(JOBS)

# The default configuration, what a user's plain `cmake -S . -B b -DCMAKE_BUILD_TYPE=Release`
# builds, so it cannot break unnoticed, and the .deb from it (docs/packaging.md). Its test
# suites are left out here: build-asan compiles the same sources with -Werror, and they are
# never run from this build (CI time).
build-default: deps
	cmake -S . -B build-default -DCMAKE_BUILD_TYPE=Release -DWHARF_WERROR=ON -DWHARF_BUILD_TESTS=OFF
	cmake --build build-default -j $(JOBS)

package: build-default
	cmake --build build-default --target package

run: build
	mkdir -p data
	exec build/src/server/wharfd --config config/wharfd.toml --data-dir ./data

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer.
test-build: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWHARF_SANITIZE=address,undefined \
	  -DWHARF_BUILD_TESTS=ON -DWHARF_BUILD_BENCH=OFF -DWHARF_WERROR=ON \
	  -DWHARF_PACKAGE_BUILD_DIR=$(CURDIR)/build-default
	cmake --build build-asan -j $(JOBS)

# The suite (build-asan), with the packaging tests on build-default's install and .deb.
test: test-build package
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 300

bench: build
	@ls build/bench

format:
	find src include tests bench \( -name "*.h" -o -name "*.cc" \) -print0 | xargs -0 clang-format -i

clean:
	rm -rf build build-asan build-default
