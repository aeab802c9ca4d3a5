# Third-party libraries, all from Debian 12 packages (scripts/setup.sh installs them).
find_package(absl CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(simdjson CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(Threads REQUIRED)
# HTTP (net/): Boost.Asio and Beast, header-only in 1.74.
find_package(Boost 1.74 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(OpenSSL REQUIRED)
# KV events (kvx/): ZeroMQ through cppzmq, msgpack-cxx (which brings Boost headers).
find_package(cppzmq CONFIG REQUIRED)
find_package(msgpackc-cxx CONFIG REQUIRED NAMES msgpack)
# The remote KV tier (kvx/redis_block_store) speaks to Redis through hiredis.
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
# The router's ext_proc server (Envoy's protocol): gRPC 1.51 and protobuf 3.21, with the
# compilers that generate its code at build time (src/router/CMakeLists.txt).
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++ protobuf)
find_program(PROTOC protoc REQUIRED)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
# The Kubernetes API client (kube/): HTTPS, streamed watches.
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
# Engine metrics.
find_package(prometheus-cpp CONFIG REQUIRED)
if(SY_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(SY_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
