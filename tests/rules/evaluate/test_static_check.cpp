// Static checks on candidate sources: every rule fires on what it forbids
// (with the right line), stays quiet on look-alikes, and ignores comments and
// string literals.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "rules/evaluate/static_check.h"

namespace forge {

TEST_SUITE_BEGIN("rules::StaticCheck");

namespace {

const char* kEntry =
    "#include \"forge_kernel.h\"\n"
    "extern \"C\" int forge_kernel(const forge_call* call) {\n"
    "  return 0;\n"
    "}\n";

// A valid candidate with `body` inserted after the entry point (line 5 on).
std::string with(const std::string& body) {
  return std::string(kEntry) + body;
}

// The rule ids that fire, in order, as one string: "thread@5 io@6".
std::string fired(const std::string& src, CandidateLang lang = CandidateLang::Cpp) {
  std::string s;
  for (const auto& v : static_check(src, lang)) {
    if (!s.empty()) s += " ";
    s += v.rule + "@" + std::to_string(v.line);
  }
  return s;
}

}  // namespace

TEST_CASE("a plain candidate passes, in C++ and CUDA") {
  CHECK(fired(kEntry) == "");
  CHECK(fired(kEntry, CandidateLang::Cuda) == "");
  // OpenMP, std::vector scratch, math and a mutable helper named `thread_count` are fine.
  CHECK(fired(with("#include <vector>\n#include <cmath>\n#pragma omp parallel for\n"
                   "static int thread_count(int n) { std::vector<float> v(n); return n; }\n")) ==
        "");
}

TEST_CASE("every rule has an id and a one-line rationale") {
  for (const auto& r : static_rules()) {
    CHECK(std::string(r.id).size() > 0);
    CHECK(std::string(r.rationale).size() > 20);
    CHECK(std::string(r.rationale).find('\n') == std::string::npos);
  }
}

TEST_CASE("no forge_kernel definition") {
  CHECK(fired("int other(int x) { return x; }\n") == "no_entry@0");
  // A declaration alone (the header's) is not a definition.
  CHECK(fired("#include \"forge_kernel.h\"\nint forge_kernel(const forge_call* c);\n") ==
        "no_entry@0");
  // Mentioned only in a comment or a string: still missing.
  CHECK(fired("// int forge_kernel(const forge_call* c) { }\n"
              "const char* s = \"int forge_kernel(const forge_call* c) {\";\n") == "no_entry@0");
}

TEST_CASE("torch headers") {
  CHECK(fired(with("#include <torch/extension.h>\n")) == "torch_header@5");
  CHECK(fired(with("#include \"ATen/ATen.h\"\n")) == "torch_header@5");
  CHECK(fired(with("#  include <c10/util/Half.h>\n")) == "torch_header@5");
  CHECK(fired(with("#include <Python.h>\n")) == "torch_header@5");
  // Commented out: fine. A header merely named like one: fine.
  CHECK(fired(with("// #include <torch/extension.h>\n/* #include <ATen/ATen.h> */\n")) == "");
  CHECK(fired(with("#include \"my_torch_like.h\"\n")) == "");
}

TEST_CASE("vendor libraries") {
  CHECK(fired(with("#include <cublas_v2.h>\n"), CandidateLang::Cuda) == "library@5");
  CHECK(fired(with("#include <cudnn.h>\n"), CandidateLang::Cuda) == "library@5");
  CHECK(fired(with("void f() { cublasHandle_t h; cublasCreate(&h); }\n"), CandidateLang::Cuda) ==
        "library@5");
  CHECK(fired(with("void f(float* a) { cblas_sscal(3, 2.f, a, 1); }\n")) == "library@5");
  // The device-side curand API (curand_kernel.h) is not a host library call.
  CHECK(fired(with("#include <curand_kernel.h>\n__device__ void f(curandState* s) { "
                   "curand_init(1, 0, 0, s); }\n"),
              CandidateLang::Cuda) == "");
  CHECK(fired(with("// cublasSgemm would be cheating\n"), CandidateLang::Cuda) == "");
}

TEST_CASE("threads and processes") {
  CHECK(fired(with("void f() { std::thread t([]{}); t.detach(); }\n")) == "thread@5");
  CHECK(fired(with("void f() { std :: jthread t([]{}); }\n")) == "thread@5");
  CHECK(fired(with("void f() { auto r = std::async([]{ return 1; }); }\n")) == "thread@5");
  CHECK(fired(with("void f() { pthread_t t; pthread_create(&t, 0, 0, 0); }\n")) == "thread@5");
  CHECK(fired(with("void f() { if (fork() == 0) {} }\n")) == "thread@5");
  CHECK(fired(with("using namespace std;\nvoid f() { thread t(g); }\n")) == "thread@6");
  // Not threads: CUDA's thread index, a word in a comment or a string, thread_local.
  CHECK(fired(with("__global__ void k() { int thread = threadIdx.x; (void)thread; }\n"),
              CandidateLang::Cuda) == "");
  CHECK(fired(with("// this kernel never starts a std::thread\n"
                   "const char* msg = \"no std::thread here, no fork()\";\n"
                   "thread_local int scratch;\n")) == "");
}

TEST_CASE("streams, events and host callbacks") {
  const auto cu = CandidateLang::Cuda;
  CHECK(fired(with("void f() { cudaStream_t s; cudaStreamCreate(&s); }\n"), cu) == "stream@5");
  CHECK(fired(with("void f() { cudaStream_t s; cudaStreamCreateWithFlags(&s, 1); }\n"), cu) ==
        "stream@5");
  CHECK(fired(with("void f(cudaStream_t s) { cudaStreamBeginCapture(s, "
                   "cudaStreamCaptureModeGlobal); }\n"),
              cu) == "stream@5");
  CHECK(fired(with("void f() { cudaEvent_t e; cudaEventCreate(&e); }\n"), cu) == "stream@5");
  CHECK(fired(with("__global__ void k();\nvoid f() { k<<<1, 32, 0, cudaStreamPerThread>>>(); }\n"),
              cu) == "stream@6");
  CHECK(fired(with("void f(cudaStream_t s) { cudaLaunchHostFunc(s, 0, 0); }\n"), cu) == "stream@5");
  CHECK(fired(with("/* cudaStreamCreate is forbidden */\n"), cu) == "");
}

TEST_CASE("launches on the default stream (CUDA)") {
  const auto cu = CandidateLang::Cuda;
  CHECK(fired(with("__global__ void k(int);\nvoid f() { k<<<1, 32>>>(1); }\n"), cu) ==
        "default_stream@6");
  CHECK(fired(with("__global__ void k(int);\nvoid f() { k<<<1, 32, 0>>>(1); }\n"), cu) ==
        "default_stream@6");
  CHECK(fired(with("__global__ void k(int);\nvoid f() { k<<<1, 32, 0, 0>>>(1); }\n"), cu) ==
        "default_stream@6");
  CHECK(fired(with("__global__ void k(int);\nvoid f() { k<<<dim3(1, 2), 32, 0, nullptr>>>(1); }\n"),
              cu) == "default_stream@6");
  // On the caller's stream, also with commas inside the grid expression: fine.
  CHECK(fired(with("__global__ void k(int);\nvoid f(const forge_call* c) {\n"
                   "  k<<<dim3(1, 2), 32, 0, (cudaStream_t)c->stream>>>(1);\n}\n"),
              cu) == "");
  CHECK(fired(with("__global__ void k(int);\nvoid f(cudaStream_t s) {\n  k<<<\n    dim3(4), 32,"
                   " 0,\n    s>>>(1);\n}\n"),
              cu) == "");
}

TEST_CASE("the environment") {
  CHECK(fired(with("int f() { return getenv(\"N\") != 0; }\n")) == "environment@5");
  CHECK(fired(with("int f() { return std::getenv(\"N\") != 0; }\n")) == "environment@5");
  CHECK(fired(with("int f() { return secure_getenv(\"N\") != 0; }\n")) == "environment@5");
  CHECK(fired(with("extern char** environ;\n")) == "environment@5");
  CHECK(fired(with("// reads no getenv(), no environ\nint environment_size = 3;\n")) == "");
}

TEST_CASE("file, console, network and process I/O") {
  CHECK(fired(with("void f() { FILE* p = fopen(\"/tmp/x\", \"w\"); }\n")) == "io@5");
  CHECK(fired(with("void f() { std::ofstream o(\"x\"); }\n")) == "io@5");
  CHECK(fired(with("void f() { std::ifstream i(\"x\"); }\n")) == "io@5");
  CHECK(fired(with("void f() { int fd = open(\"/etc/passwd\", 0); }\n")) == "io@5");
  CHECK(fired(with("void f() { int s = socket(2, 1, 0); connect(s, 0, 0); }\n")) == "io@5");
  CHECK(fired(with("void f() { system(\"ls\"); }\n")) == "io@5");
  CHECK(fired(with("void f() { popen(\"ls\", \"r\"); }\n")) == "io@5");
  CHECK(fired(with("void f() { execvp(\"ls\", 0); }\n")) == "io@5");
  CHECK(fired(with("void f() { printf(\"%d\", 1); }\n")) == "io@5");
  CHECK(fired(with("void f() { std::cout << 1; }\n")) == "io@5");
  CHECK(fired(with("void f() { write(2, \"x\", 1); }\n")) == "io@5");
  CHECK(fired(with("void f() { curl_easy_init(); }\n")) == "io@5");
  CHECK(fired(with("void f() { syscall(1, 1, 0, 0); }\n")) == "io@5");
  // Look-alikes: members and helpers with similar names, I/O words in comments.
  CHECK(fired(with("struct V { float read(int i) const; };\n"
                   "static float open_interval(float x) { return x; }\n"
                   "static bool is_open = false;\n"
                   "// fopen(), printf() and std::ofstream are not used here\n")) == "");
}

TEST_CASE("loading code at run time") {
  CHECK(fired(with("void* f() { return dlsym((void*)0, \"at_softmax\"); }\n")) ==
        "dynamic_loading@5");
  CHECK(fired(with("void* f() { return dlopen(\"libtorch.so\", 2); }\n")) == "dynamic_loading@5");
  CHECK(fired(with("void f() { CUmodule m; cuModuleLoadData(&m, 0); }\n"), CandidateLang::Cuda) ==
        "dynamic_loading@5");
  CHECK(fired(with("namespace at { int softmax_stub(const void*) __attribute__((weak)); }\n")) ==
        "dynamic_loading@5");
  CHECK(fired(with("#pragma weak at_softmax\n")) == "dynamic_loading@5");
  CHECK(fired(with("// no dlopen here\nint dlsym_count = 0;\n"
                   "static int f() __attribute__((noinline));\n")) == "");
}

TEST_CASE("device and mapped allocations") {
  const auto cu = CandidateLang::Cuda;
  CHECK(fired(with("void f() { float* p; cudaMalloc(&p, 4); }\n"), cu) == "allocation@5");
  CHECK(fired(with("void f(cudaStream_t s) { float* p; cudaMallocAsync(&p, 4, s); }\n"), cu) ==
        "allocation@5");
  CHECK(fired(with("void f() { float* p; cudaMallocManaged(&p, 4); }\n"), cu) == "allocation@5");
  CHECK(fired(with("void f(float* p) { cudaFree(p); }\n"), cu) == "allocation@5");
  CHECK(fired(with("void f() { void* p = mmap(0, 4096, 3, 0x22, -1, 0); }\n")) == "allocation@5");
  // Host scratch through new/std::vector is the kernel's own business.
  CHECK(fired(with("void f(int n) { float* p = new float[n]; delete[] p; }\n")) == "");
}

TEST_CASE("inline assembly: rejected on the CPU, inline PTX allowed in CUDA") {
  CHECK(fired(with("void f() { asm volatile(\"syscall\"); }\n")) == "inline_asm@5");
  CHECK(fired(with("void f() { __asm__(\"nop\"); }\n")) == "inline_asm@5");
  CHECK(fired(with("__device__ unsigned lane() { unsigned r; asm(\"mov.u32 %0, %%laneid;\" : "
                   "\"=r\"(r)); return r; }\n"),
              CandidateLang::Cuda) == "");
}

TEST_CASE("comments and literals are blanked, lines kept") {
  const std::string src =
      "int a; // std::thread\n"
      "/* fopen(\n"
      "   getenv( */ int b;\n"
      "const char* s = \"dlopen(\\\"x\\\")\";\n"
      "const char* r = R\"x(system(\"ls\"))x\";\n"
      "char c = '\"'; int d = 1'000; // popen(\n"
      "// a continued comment \\\n"
      "   fork();\n";
  const std::string code = blank_comments(src, false);
  CHECK(code.size() == src.size());
  CHECK(std::count(code.begin(), code.end(), '\n') == std::count(src.begin(), src.end(), '\n'));
  CHECK(code.find("thread") == std::string::npos);
  CHECK(code.find("fopen") == std::string::npos);
  CHECK(code.find("getenv") == std::string::npos);
  CHECK(code.find("dlopen") == std::string::npos);
  CHECK(code.find("system") == std::string::npos);
  CHECK(code.find("popen") == std::string::npos);
  CHECK(code.find("fork") == std::string::npos);
  CHECK(code.find("int b;") != std::string::npos);
  CHECK(code.find("int d = 1'000;") != std::string::npos);
  CHECK(fired(std::string(kEntry) + src) == "");
  // Strings kept: includes still readable.
  CHECK(blank_comments("#include \"a.h\" // x\n", true) == "#include \"a.h\"     \n");
}

TEST_CASE("a violation names the rule, the line and the source text") {
  auto v = static_check(with("\n  std::thread worker(run);   \n"), CandidateLang::Cpp);
  REQUIRE(v.size() == 1);
  CHECK(v[0].rule == "thread");
  CHECK(v[0].line == 6);
  CHECK(v[0].text == "std::thread worker(run);");
  CHECK(v[0].describe().rfind("thread (line 6): starts a thread", 0) == 0);
  CHECK(v[0].describe().find("`std::thread worker(run);`") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
