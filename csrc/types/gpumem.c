/*
 * gpumem.c -- the GPUMemoryInfo type (what get_gpu_vram_mb returns).
 *
 * A heap type whose attributes come from one field table (fields.c).
 */
#include "types/types.h"

#define G_OFF(m) offsetof(shp_GPUMemoryInfo, m)
static const shp_field gpumem_fields[] = {
    {"total_mb", SHP_F_DOUBLE, G_OFF(total_mb), SHP_R_MB, 1, 0, 0.0, SHP_SHOW_ALWAYS,
     "Device memory in MiB."},
    {"free_mb", SHP_F_DOUBLE, G_OFF(free_mb), SHP_R_MB, 1, 0, 0.0, SHP_SHOW_ALWAYS,
     "Free device memory in MiB (cuMemGetInfo_v2)."},
    {"used_mb", SHP_F_DOUBLE, G_OFF(used_mb), SHP_R_MB, 1, 0, 0.0, SHP_SHOW_ALWAYS,
     "total_mb - free_mb: used by every process on the device."},
    {0},
};

static PyGetSetDef gpumem_getset[4];

static PyObject *
Gpu_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    PyObject *self = type->tp_alloc(type, 0);
    if (self != NULL)
        shp_fields_set_defaults(self, gpumem_fields);
    return self;
}

static int
Gpu_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return shp_fields_init(self, gpumem_fields, args, kwargs);
}

static void
Gpu_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
Gpu_repr(PyObject *self)
{
    return shp_fields_repr(self, gpumem_fields);
}

static PyObject *
Gpu_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, Py_TYPE(a)))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = shp_fields_equal(a, b, gpumem_fields);
    if (eq < 0)
        return NULL;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *
Gpu_to_dict(PyObject *self, PyObject *unused)
{
    (void)unused;
    return shp_fields_dict(self, gpumem_fields, 1);
}

static PyObject *
Gpu_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    shp_GPUMemoryInfo *g = (shp_GPUMemoryInfo *)self;
    return Py_BuildValue("O(ddd)", (PyObject *)Py_TYPE(self), g->total_mb, g->free_mb, g->used_mb);
}

static PyMethodDef gpumem_methods[] = {
    {"to_dict", Gpu_to_dict, METH_NOARGS,
     "to_dict($self, /)\n"
     "--\n"
     "\n"
     "The three fields as a dict, MiB rounded to 2 decimals."},
    {"__reduce__", Gpu_reduce, METH_NOARGS, "Pickle support."},
    {0},
};

static PyType_Slot gpumem_slots[] = {
    {Py_tp_new, Gpu_new},
    {Py_tp_init, Gpu_init},
    {Py_tp_dealloc, Gpu_dealloc},
    {Py_tp_repr, Gpu_repr},
    {Py_tp_richcompare, Gpu_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_methods, gpumem_methods},
    {Py_tp_getset, gpumem_getset},
    {Py_tp_doc, "Device memory in MiB, as cuMemGetInfo_v2 reports it (device-wide)."},
    {0, NULL},
};

PyType_Spec shp_gpumem_spec = {
    .name = "spatialhub.utils.profiling.GPUMemoryInfo",
    .basicsize = sizeof(shp_GPUMemoryInfo),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = gpumem_slots,
};

void
shp_gpumem_prepare_spec(void)
{
    static char doc[1024];
    shp_fields_fill_getset(gpumem_fields, NULL, gpumem_getset);
    shp_fields_spec_doc(
        &shp_gpumem_spec, gpumem_fields, NULL,
        "Device memory in MiB, as cuMemGetInfo_v2 reports it (device-wide).\n\n"
        "What get_gpu_vram_mb returns.",
        NULL,
        "\n\nExamples\n--------\n"
        ">>> GPUMemoryInfo(8192.0, 6144.0, 2048.0).to_dict()\n"
        "{'total_mb': 8192.0, 'free_mb': 6144.0, 'used_mb': 2048.0}",
        doc, sizeof doc);
}

PyObject *
shp_gpumem_new(shp_state *st, size_t total_b, size_t free_b)
{
    shp_GPUMemoryInfo *g = (shp_GPUMemoryInfo *)Gpu_new(st->gpumem_type, NULL, NULL);
    if (g == NULL)
        return NULL;
    g->total_mb = (double)total_b / SHP_MIB;
    g->free_mb = (double)free_b / SHP_MIB;
    g->used_mb = (double)(total_b >= free_b ? total_b - free_b : 0) / SHP_MIB;
    return (PyObject *)g;
}
