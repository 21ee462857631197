/* The candidate ABI: what every forged kernel exposes, for the CUDA backend
 * (.cu, compiled by nvcc) and the CPU backend (.cpp, compiled by g++).
 *
 * No torch headers: a candidate includes only this file (and CUDA / the C++
 * standard library), so it compiles in about a second. The caller (the
 * evaluation worker, later the packaged library) owns every allocation: inputs
 * are the op's tensors as captured, outputs are allocated by the caller through
 * PyTorch's allocator with the stock kernel's shapes, dtypes and strides (ops
 * with several outputs, e.g. native_layer_norm's (out, mean, rstd), get all of
 * them), and the workspace, if the candidate asks for one, likewise. A kernel
 * runs on `stream` (CUDA) and must not create streams, threads that outlive the
 * call, or allocate device memory. Full contract: docs/CANDIDATE_ABI.md.
 *
 * Never change a layout without bumping FORGE_ABI_VERSION. */
#ifndef FORGE_KERNEL_H
#define FORGE_KERNEL_H

#include <stdint.h>

#define FORGE_ABI_VERSION 1
#define FORGE_MAX_DIMS 8
#define FORGE_MAX_LIST 8

/* Element types, by torch's names. Values are ABI: never renumber. */
enum forge_dtype {
  FORGE_FLOAT32 = 0,
  FORGE_FLOAT64 = 1,
  FORGE_FLOAT16 = 2,
  FORGE_BFLOAT16 = 3,
  FORGE_INT64 = 4,
  FORGE_INT32 = 5,
  FORGE_INT16 = 6,
  FORGE_INT8 = 7,
  FORGE_UINT8 = 8,
  FORGE_BOOL = 9
};

/* FORGE_DTYPES: which element types a template instantiates, as a bit mask
 * (1 << forge_dtype). forge defines it as the dtypes of the signature's
 * float tensors, inputs and outputs (the signature family fixes them; a call
 * with others falls back), so nvcc compiles one instance instead of every
 * combination: half the compile time per candidate. Absent: every type. */
#ifndef FORGE_DTYPES
#define FORGE_DTYPES 0xFFFF
#endif

/* A strided view. `data` is NULL and ndim is -1 for an absent (None) tensor. */
typedef struct forge_tensor {
  void* data;
  int64_t sizes[FORGE_MAX_DIMS];
  int64_t strides[FORGE_MAX_DIMS]; /* in elements, as torch reports them */
  int32_t ndim;
  int32_t dtype; /* enum forge_dtype */
} forge_tensor;

/* Values are ABI: never renumber. */
enum forge_arg_kind {
  FORGE_ARG_NONE = 0,
  FORGE_ARG_INT = 1,
  FORGE_ARG_FLOAT = 2,
  FORGE_ARG_BOOL = 3,     /* in i */
  FORGE_ARG_INT_LIST = 4, /* len entries in ints */
  FORGE_ARG_DTYPE = 5,    /* enum forge_dtype in i */
  FORGE_ARG_STRING = 6    /* len bytes in ints, read as chars, NUL-terminated */
};

/* The longest string argument (FORGE_ARG_STRING) the ABI carries: its bytes
 * and the terminating NUL fill `ints`. Read it as (const char*)scalar->ints.
 * A string argument always equals the captured one (the signature fixes it). */
#define FORGE_MAX_STRING (8 * FORGE_MAX_LIST - 1)

/* One non-tensor argument of the op. */
typedef struct forge_scalar {
  int32_t kind; /* enum forge_arg_kind */
  int32_t len;
  int64_t i;
  double f;
  int64_t ints[FORGE_MAX_LIST];
} forge_scalar;

/* One call of the op. Tensor arguments in schema order go to `inputs`, all other
 * arguments in schema order to `scalars`; `outputs` are the op's returns in order,
 * then the new value of each input the call changes that no return is (training
 * batch norm's running statistics; docs/CANDIDATE_ABI.md, "Changed inputs"). */
typedef struct forge_call {
  const forge_tensor* inputs;
  int32_t n_inputs;
  forge_tensor* outputs;
  int32_t n_outputs;
  const forge_scalar* scalars;
  int32_t n_scalars;
  void* workspace;
  int64_t workspace_bytes;
  void* stream; /* cudaStream_t on the CUDA backend, NULL on the CPU backend */
} forge_call;

#ifdef __cplusplus
extern "C" {
#endif

/* Required. Computes the outputs; returns 0, or nonzero when it cannot handle
 * this call (the verifier counts that as a failure, the package falls back). */
int forge_kernel(const forge_call* call);

/* Optional. Workspace bytes the call needs; outputs are allocated but unset. */
int64_t forge_workspace_bytes(const forge_call* call);

#ifdef __cplusplus
}
#endif

#endif /* FORGE_KERNEL_H */
