/* Tensormorph backend plugin ABI, version 1.
 *
 * Contract
 * --------
 * A backend is a shared library exporting exactly one C symbol, TM_PLUGIN_ENTRY_SYMBOL, with the
 * signature tm_plugin_entry_fn. Core calls it once with the ABI version it speaks; the plugin returns a
 * pointer to a static tm_backend_v1 table (or NULL if it cannot speak that version). The CPU backend is
 * linked statically but registers through the same table, so core never special-cases it.
 *
 * All calls are synchronous. run, upload and release may be called from several threads at once (a
 * plugin serialises what its devices need serialised). Strings returned by a plugin are owned by the plugin and live until the
 * library is unloaded. Errors are reported by return code plus a message the plugin writes into a
 * caller-owned tm_message. No call may abort the process.
 *
 * Everything here is plain C so that a plugin can be written in any language with a C FFI.
 */
#ifndef TENSORMORPH_PLUGIN_ABI_H
#define TENSORMORPH_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TM_PLUGIN_ABI_VERSION 1u
#define TM_PLUGIN_ENTRY_SYMBOL "tensormorph_backend_entry"

/* ---- return codes ---------------------------------------------------------------------------- */
typedef enum tm_status {
  TM_OK = 0,
  TM_ERR_INVALID_ARGUMENT = 1, /* the call itself is malformed (bad op, dtype, sizes)           */
  TM_ERR_UNSUPPORTED = 2,      /* the backend has no kernel for this op/dtype                     */
  TM_ERR_OUT_OF_MEMORY = 3,
  TM_ERR_DEVICE = 4,           /* the device failed while running                                 */
  TM_ERR_INTERNAL = 5
} tm_status;

/* Caller-owned buffer for an error message (UTF-8, always NUL-terminated by the writer). */
typedef struct tm_message {
  char text[512];
} tm_message;

/* ---- element types ---------------------------------------------------------------------------- */
/* Stable numeric ids; never renumber. */
typedef enum tm_dtype {
  TM_DTYPE_INVALID = 0,
  TM_DTYPE_F64 = 1,
  TM_DTYPE_F32 = 2,
  TM_DTYPE_F16 = 3,
  TM_DTYPE_BF16 = 4,
  TM_DTYPE_F8_E4M3FN = 5, /* 1-4-3, bias 7, no infinities, NaN = S.1111.111 (OCP FP8)              */
  TM_DTYPE_F8_E5M2 = 6,   /* 1-5-2, bias 15, IEEE-like: infinities and NaNs                         */
  TM_DTYPE_I8 = 7,
  TM_DTYPE_I16 = 8,
  TM_DTYPE_I32 = 9,
  TM_DTYPE_I64 = 10,
  TM_DTYPE_U8 = 11,
  TM_DTYPE_U16 = 12,
  TM_DTYPE_U32 = 13,
  TM_DTYPE_U64 = 14,
  TM_DTYPE_BOOL = 15,     /* one byte; zero is false, any other byte is true (counted as 1)         */
  TM_DTYPE_COUNT_ = 16
} tm_dtype;

/* ---- operations -------------------------------------------------------------------------------- */
/* Each op's parameters and outputs are defined by its contract in op_contracts.h. */
typedef enum tm_op {
  TM_OP_INVALID = 0,
  TM_OP_STATS_MOMENTS = 1,             /* per-block partial moments                                */
  TM_OP_STATS_HISTOGRAM = 2,           /* counts over caller-given edges                           */
  TM_OP_STATS_BITPATTERN_HISTOGRAM = 3,/* counts of every bit pattern of an 8- or 16-bit dtype     */
  TM_OP_STATS_QUANTILES = 4,           /* quantiles of the finite values                           */
  TM_OP_DEQUANTIZE_GGML = 5,           /* ggml block formats (GGUF) to float32                     */
  TM_OP_DIFF_MOMENTS = 6,              /* sums that measure how far one float32 array is from another */
  TM_OP_GGML_BLOCK_STATS = 7,          /* block scales and code usage of a ggml block format        */
  TM_OP_DEQUANTIZE_PACKED = 8,         /* safetensors-packed schemes (GPTQ, AWQ, bnb, FP8, MXFP4) to float32 */
  TM_OP_QUANT_MOMENTS = 9,             /* moments of a ggml block format from its codes and scales   */
  TM_OP_STEM_FRAME_SUMS = 10,          /* per-frame totals, centre-of-mass and masked sums (4D-STEM) */
  TM_OP_STEM_PATTERN_REDUCE = 11,      /* per-pixel sum and maximum over frames (4D-STEM)            */
  TM_OP_DISPLAY_COLORIZE = 12,         /* RGBA colours and a 256-bin histogram of float64 values (display) */
  TM_OP_STEM_SSB_OVERLAP = 13,         /* SSB ptychography: per bright-field pixel correction, inverse FFT, reduction */
  TM_OP_DECODE_BITSHUFFLE_LZ4 = 14,    /* chunks of HDF5 filter 32008 (bitshuffle + LZ4), e.g. 4D-STEM frames */
  TM_OP_LOD_TILE_STATS = 15,           /* level-0 statistics pyramid tiles of one band of a 2-D view   */
  TM_OP_DIFF_TILE_STATS = 16,          /* level-0 difference pyramid tiles of one band of a tensor pair */
  TM_OP_STEM_COMPACT_SUMS = 17,        /* stem.frame_sums over frames held in the compact resident form (4D-STEM) */
  TM_OP_COUNT_ = 18
} tm_op;

/* ---- devices ------------------------------------------------------------------------------------ */
typedef enum tm_device_kind {
  TM_DEVICE_CPU = 0,
  TM_DEVICE_GPU = 1,              /* a discrete GPU with its own memory                          */
  TM_DEVICE_SOFTWARE_ADAPTER = 2, /* a GPU API implemented on the CPU (lavapipe, SwiftShader)    */
  TM_DEVICE_INTEGRATED_GPU = 3    /* a GPU that shares the host's memory                         */
} tm_device_kind;

/* Feature bits a kernel may require and a device may offer. */
#define TM_FEATURE_F64 (1ull << 0)
#define TM_FEATURE_F16 (1ull << 1)
#define TM_FEATURE_INT64_ATOMICS (1ull << 2)
#define TM_FEATURE_INT64 (1ull << 3) /* 64-bit integer arithmetic in kernels                          */

typedef struct tm_device_info_v1 {
  uint32_t struct_size;          /* sizeof(tm_device_info_v1) as the plugin was built            */
  tm_device_kind kind;
  const char* name;              /* human name as the driver reports it                          */
  const char* id;                /* stable identity for calibration caches (e.g. vendor:device)  */
  uint64_t memory_bytes;         /* device-local memory (host RAM for CPU devices)               */
  uint64_t max_allocation_bytes; /* largest single allocation                                    */
  uint64_t max_buffer_binding_bytes; /* largest range one kernel argument may cover              */
  uint64_t features;             /* TM_FEATURE_* bits                                            */
  /* Bytes/s to move data between host memory and this device; 0 means the device works on host
   * memory directly (no transfer is ever needed). */
  double host_link_bytes_per_s;
  /* Since the driver-version extension (core reads it only when struct_size covers it; a plugin writes
   * no more than the caller's struct_size): the driver's version as the API reports it, or NULL. Core
   * keys cached kernel self-test verdicts by it, so a driver update tests again. */
  const char* driver_version;
} tm_device_info_v1;

/* ---- availability --------------------------------------------------------------------------------- */
typedef enum tm_unavailable_reason {
  TM_AVAILABLE = 0,
  TM_REASON_NO_DRIVER = 1,
  TM_REASON_NO_DEVICE = 2,
  TM_REASON_DRIVER_TOO_OLD = 3,
  TM_REASON_MISSING_DEPENDENCY = 4,
  TM_REASON_DISABLED_BY_POLICY = 5
} tm_unavailable_reason;

/* ---- kernel capabilities --------------------------------------------------------------------------- */
typedef enum tm_precision_class {
  TM_PRECISION_EXACT = 0,         /* bit-identical to the CPU reference                          */
  TM_PRECISION_DETERMINISTIC = 1, /* reproducible run to run, not bit-identical to the reference */
  TM_PRECISION_BOUNDED = 2        /* within `tolerance` (relative, op-specific meaning)          */
} tm_precision_class;

typedef struct tm_kernel_cap_v1 {
  uint32_t struct_size;
  tm_op op;
  uint64_t dtype_mask;            /* bit (1 << tm_dtype) for each supported input dtype          */
  uint64_t max_elements;          /* largest input one call may take (0 = unlimited)             */
  uint64_t required_features;     /* TM_FEATURE_* bits the device must offer                     */
  tm_precision_class precision;
  double tolerance;               /* for TM_PRECISION_BOUNDED; 0 otherwise                       */
  /* Extra memory the kernel needs: fixed + per_element * elements bytes. Core checks it against the
   * memory budget before placing the kernel. */
  uint64_t workspace_fixed_bytes;
  double workspace_bytes_per_element;
  /* NULL for an exact kernel. For an approximate one: the name of the approximation step a caller must
   * consent to (e.g. "quantiles.bitpattern_sketch") and one sentence saying what it computes instead. */
  const char* approx_step;
  const char* approx_description;
} tm_kernel_cap_v1;

/* ---- kernel calls ------------------------------------------------------------------------------------ */
typedef struct tm_kernel_call_v1 {
  uint32_t struct_size;
  tm_op op;
  uint32_t kernel_index;          /* which of the backend's kernels (index into kernel_info)     */
  uint32_t device_index;
  tm_dtype dtype;
  const void* input;              /* host memory, element_count elements of dtype, little-endian */
  uint64_t element_count;
  const void* params;             /* op-specific, see op_contracts.h                             */
  uint64_t params_size;
  void* output;                   /* op-specific, caller-allocated                               */
  uint64_t output_size;
  uint32_t threads;               /* how many host threads the call may use (>= 1)               */
  /* Since the residency extension (a plugin reads these only when struct_size covers them):
   * nonzero input_buffer names a device copy made by tm_backend_v1.upload on this call's device; the
   * call's input is then its bytes from input_offset on (a multiple of 65,536 bytes), and `input` points
   * at the same data on the host. 0: the input is on the host only. */
  uint64_t input_buffer;
  uint64_t input_offset;
  /* Since the device-output extension (read only by a plugin whose table has `allocate`):
   * nonzero input_buffer may also name a buffer an earlier call wrote on the device (output_buffer), whose
   * bytes have no host copy; `input` is then NULL. Nonzero output_buffer names a buffer from upload or
   * allocate on this call's device: an op whose contract allows it (TM_OP_DECODE_BITSHUFFLE_LZ4) writes its
   * output there from output_offset on (a multiple of 65,536 bytes) instead of to `output`, which may then
   * be NULL; every other op refuses the call (TM_ERR_INVALID_ARGUMENT). 0: the output is on the host. */
  uint64_t output_buffer;
  uint64_t output_offset;
} tm_kernel_call_v1;

/* ---- the backend table ----------------------------------------------------------------------------- */
typedef struct tm_backend_v1 {
  uint32_t abi_version;           /* TM_PLUGIN_ABI_VERSION the plugin was built against         */
  uint32_t struct_size;           /* sizeof(tm_backend_v1) as the plugin was built             */
  const char* name;               /* short lower-case name used on the command line             */
  const char* description;

  /* Initialise; on failure set *reason and write why into msg. Called once before anything else. */
  tm_status (*init)(tm_unavailable_reason* reason, tm_message* msg);
  void (*shutdown)(void);

  uint32_t (*device_count)(void);
  tm_status (*device_info)(uint32_t index, tm_device_info_v1* out);

  uint32_t (*kernel_count)(void);
  tm_status (*kernel_info)(uint32_t index, tm_kernel_cap_v1* out);

  tm_status (*run)(const tm_kernel_call_v1* call, tm_message* msg);

  /* Residency extension (core uses these only when struct_size covers them and both are non-NULL).
   * upload copies `bytes` of host data to device `device_index` and returns a nonzero handle that later
   * calls pass as input_buffer, so several ops over one tensor move it once. release frees it. A backend
   * whose devices work on host memory leaves both NULL. */
  tm_status (*upload)(uint32_t device_index, const void* data, uint64_t bytes, uint64_t* buffer, tm_message* msg);
  void (*release)(uint64_t buffer);

  /* Device-output extension (core uses it only when struct_size covers it and it is non-NULL):
   * allocate reserves `bytes` zeroed bytes on device `device_index` and returns a handle like upload's
   * (released by release), for calls to write into (output_buffer) and later calls to read (input_buffer),
   * so data made on the device stays there. TM_ERR_OUT_OF_MEMORY when the device cannot hold it. */
  tm_status (*allocate)(uint32_t device_index, uint64_t bytes, uint64_t* buffer, tm_message* msg);
} tm_backend_v1;

typedef const tm_backend_v1* (*tm_plugin_entry_fn)(uint32_t abi_version);

#if defined(_WIN32)
#define TM_PLUGIN_EXPORT __declspec(dllexport)
#else
#define TM_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORMORPH_PLUGIN_ABI_H */
