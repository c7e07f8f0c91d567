/*
 * device.c -- what a device label means, for every caller.
 *
 *   "CPU", "", anything else   the CPU (no sync)
 *   contains "cuda" (any case) CUDA: "CUDA", "cuda:1", "CUDAExecutionProvider"
 *                              (an ordinal after a ':' following "cuda")
 *   "mps" or "mps:..."         Apple's Metal (torch.mps.synchronize)
 *   "gpu", "xpu", "rocm", ...  another accelerator (SHP_ACCELERATORS, any case,
 *                              optionally ":N"): no sync we can apply, so
 *                              benchmark_callable warns unless sync_fn is given
 *
 * benchmark_callable refuses a malformed ordinal ("cuda:x"); the table,
 * which only shows stored results, still counts such a label as CUDA.  Both
 * read it here.  A leaf: no module state, no calls into other files.
 */
#include "gpu/gpu.h"

#include <string.h>

#define SHP_ORDINAL_CLAMP 1000000L

/* 1 CUDA (ordinal in *ordinal, -1 when none), 0 not CUDA, -1 malformed. */
static int
parse_cuda(const char *device, int *ordinal)
{
    const char *p;
    long v = 0;

    *ordinal = -1;
    /* ASCII case folding by hand: locale-independent, and '\0' | 0x20 is
     * no letter, so the test never reads past the terminator. */
    for (p = device; *p != '\0'; p++)
        if ((p[0] | 0x20) == 'c' && (p[1] | 0x20) == 'u' && (p[2] | 0x20) == 'd' &&
            (p[3] | 0x20) == 'a')
            break;
    if (*p == '\0')
        return 0;
    const char *colon = strchr(p + 4, ':');
    if (colon == NULL)
        return 1;   /* "CUDA", "CUDAExecutionProvider": the default device */
    if (colon[1] == '\0')
        return -1;
    for (p = colon + 1; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        /* Clamped far beyond any device count (it is range-checked later)
         * so that a long digit string cannot overflow. */
        if (v < SHP_ORDINAL_CLAMP)
            v = v * 10 + (*p - '0');
    }
    *ordinal = (int)(v < SHP_ORDINAL_CLAMP ? v : SHP_ORDINAL_CLAMP);
    return 1;
}

/* Accelerators that run asynchronously but have no sync we can apply
 * ourselves.  Deliberately an explicit list: ONNX Runtime provider names
 * ("...ExecutionProvider") and free-form tags stay plain labels. */
static const char *const accelerators[] = {
    "gpu", "xpu", "rocm", "hip", "npu", "tpu", "hpu", "ipu", "mlu", "dml", "directml",
    "vulkan", "opencl", "metal", "ane", NULL,
};

/* 1 if dev (before an optional ':') is one of `accelerators`, any case. */
static int
is_other_accelerator(const char *dev)
{
    size_t n = strcspn(dev, ":");
    for (const char *const *a = accelerators; *a != NULL; a++)
        if (strlen(*a) == n && PyOS_strnicmp(dev, *a, n) == 0)
            return 1;
    return 0;
}

int
shp_device_parse(PyObject *label, shp_device *out)
{
    out->kind = SHP_DEV_CPU;
    out->ordinal = -1;
    out->label = label;
    const char *dev = PyUnicode_AsUTF8(label);
    if (dev == NULL)
        return -1;
    int c = parse_cuda(dev, &out->ordinal);
    if (c != 0) {
        out->kind = SHP_DEV_CUDA;
        if (c < 0) {
            PyErr_Format(PyExc_ValueError,
                         "device '%.200s': the CUDA ordinal after ':' must be a non-negative "
                         "integer (e.g. \"cuda:1\")", dev);
            return -1;
        }
        return 0;
    }
    if (PyOS_strnicmp(dev, "mps", 3) == 0 && (dev[3] == '\0' || dev[3] == ':'))
        out->kind = SHP_DEV_MPS;
    else if (is_other_accelerator(dev))
        out->kind = SHP_DEV_OTHER;
    return 0;
}
