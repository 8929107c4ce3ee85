# The two commands: `make run` and `make test`. Both install missing Debian packages first
# (through sudo when not root), then build with CMake. See README.md.
PKGS := cmake g++ make pkg-config libasio-dev libspdlog-dev libprotobuf-dev protobuf-compiler \
        librocksdb-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libtoml11-dev librabbitmq-dev libjemalloc-dev \
        libcpp-httplib-dev libcli11-dev nlohmann-json3-dev libsystemd-dev dpkg-dev file \
        python3 python3-pika python3-kombu python3-yaml golang-go golang-github-rabbitmq-amqp091-go-dev openssl \
        iproute2 libpcre2-dev ninja-build
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JOBS ?= $(shell nproc)
# The suite's processes wait on sockets, timers and fsync part of the time: one more than the
# cores keeps them busy (docs/testing.md, "CI time").
TEST_JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: deps build build-default package run test test-build fuzz bench clean format

# The fuzz targets' compiler and libFuzzer runtime (make fuzz only).
FUZZ_PKGS := clang libclang-rt-14-dev
FUZZ_SECONDS ?= 60

# $(call install_missing,PACKAGES): apt-get installs those not installed yet.
define install_missing
@missing=$$(for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

# $(call ninja_dir,DIR): a build directory an older Makefile configured for make is configured
# again for Ninja (CMake refuses to switch a directory's generator).
define ninja_dir
@if [ -f $(1)/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$$' $(1)/CMakeCache.txt; then \
	  echo "$(1): configured for another generator, configuring it again for Ninja"; \
	  rm -rf $(1)/CMakeCache.txt $(1)/CMakeFiles; \
	fi
endef

deps:
	$(call install_missing,$(PKGS))
	@# Node and npm (the README's Node quick start test): any installed ones, else Debian's.
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }

# Release build: wharfd, wharfctl, wharf-perf, benchmarks. The Makefile's builds treat
# warnings as errors (WHARF_WERROR); a plain CMake build does not.
build: deps
	$(call ninja_dir,build)
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWHARF_BUILD_TESTS=OFF -DWHARF_BUILD_BENCH=ON \
	  -DWHARF_WERROR=ON
	cmake --build build -j $(JOBS)

# The default configuration, what a user's plain `cmake -S . -B b -DCMAKE_BUILD_TYPE=Release`
# builds, so it cannot break unnoticed, and the .deb from it (docs/packaging.md). Its test
# suites are left out here: build-asan compiles the same sources with -Werror, and they are
# never run from this build (CI time).
build-default: deps
	$(call ninja_dir,build-default)
	cmake -S . -B build-default -G Ninja -DCMAKE_BUILD_TYPE=Release -DWHARF_WERROR=ON -DWHARF_BUILD_TESTS=OFF
	cmake --build build-default -j $(JOBS)

package: build-default
	cmake --build build-default --target package

run: build
	mkdir -p data
	exec build/src/server/wharfd --config config/wharfd.toml --data-dir ./data

# What only the suite needs: Debian's chromium for the web console's browser test
# (tests/browser/, driven by playwright-core from npm), and a font for its pages.
TEST_PKGS := chromium fonts-dejavu-core

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer. Line tables only (-g1:
# what a sanitizer's report needs, file and line of every frame) and the gold linker: the
# build's time, not what it checks (docs/testing.md, "CI time").
test-build: deps
	$(call install_missing,$(TEST_PKGS))
	$(call ninja_dir,build-asan)
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
	  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=gold -DWHARF_SANITIZE=address,undefined \
	  -DWHARF_BUILD_TESTS=ON -DWHARF_BUILD_BENCH=OFF -DWHARF_WERROR=ON \
	  -DWHARF_PACKAGE_BUILD_DIR=$(CURDIR)/build-default
	cmake --build build-asan -j $(JOBS)

# The suite (build-asan), with the packaging tests on build-default's install and .deb.
test: test-build package
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(TEST_JOBS) --timeout 300

# libFuzzer targets (fuzz/, docs/testing.md "Fuzzing"), built with clang under
# AddressSanitizer + UndefinedBehaviorSanitizer, each run for FUZZ_SECONDS (two at a time) from
# its seed corpus and kept crash inputs. A crash fails the run and leaves the input in
# build-fuzz/fuzz-work/<target>/; `make test` replays fuzz/regressions/ on every run.
fuzz: deps
	$(call install_missing,$(FUZZ_PKGS))
	$(call ninja_dir,build-fuzz)
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DWHARF_FUZZ=ON -DWHARF_SANITIZE=address,undefined \
	  -DWHARF_BUILD_TESTS=OFF -DWHARF_BUILD_BENCH=OFF -DWHARF_WERROR=ON
	cmake --build build-fuzz -j $(JOBS) --target wharf_fuzzers
	fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

bench: build
	@ls build/bench

format:
	find src include tests bench \( -name "*.h" -o -name "*.cc" \) -print0 | xargs -0 clang-format -i

clean:
	rm -rf build build-asan build-default build-fuzz
