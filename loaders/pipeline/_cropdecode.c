/* Region-of-interest JPEG decode through libjpeg-turbo's partial decompression.
 *
 * Only the rows and columns of a box are decoded: jpeg_skip_scanlines() passes over the rows above
 * it (entropy decoding only, no inverse DCT, upsampling or colour conversion), jpeg_crop_scanline()
 * limits the rows read to the iMCU columns that hold the box, and decoding stops after the box's
 * last row: the rest of the file is never entropy-decoded. The decoder's settings are simplejpeg's
 * fastdct + fastupsample (the whole-image path's), so the box's pixels are the whole decode's.
 *
 * Built at install time against the system's libjpeg-turbo (Debian: libjpeg62-turbo-dev); where it
 * is missing the module is not built and the loaders decode whole images.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} error_mgr;

static void on_error(j_common_ptr cinfo)
{
    error_mgr *err = (error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

/* A warning (level -1) means corrupt data libjpeg would paper over: refused, as the whole-image
 * decoder's strict mode refuses it, so that the caller's fallback sees the same files. */
static void on_message(j_common_ptr cinfo, int level)
{
    if (level < 0)
        on_error(cinfo);
}

#define ROWS_PER_READ 16

enum outcome { DECODED, BAD_BOX, NOT_RGB, FAILED };

typedef struct {
    const unsigned char *data;
    unsigned long size;
    int x, y, w, h;
    unsigned char *out;
    Py_ssize_t out_rows, out_cols, stride;
    JDIMENSION left, width; /* the columns decoded: [left, left + width) holds [x, x + w) */
    char message[JMSG_LENGTH_MAX];
} job;

/* Runs without the GIL: touches only the job, libjpeg's state and the two held buffers. */
static enum outcome decode_box(job *j)
{
    struct jpeg_decompress_struct cinfo;
    error_mgr err;
    volatile enum outcome result = FAILED;
    JSAMPROW rows[ROWS_PER_READ];

    memset(&cinfo, 0, sizeof(cinfo)); /* a destroy after an early error finds nothing to free */
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    err.message[0] = '\0';
    if (setjmp(err.jump)) {
        memcpy(j->message, err.message, sizeof(j->message));
        jpeg_destroy_decompress(&cinfo);
        return result;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, j->data, j->size);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return NOT_RGB;
    }
    if (j->x < 0 || j->y < 0 || j->w <= 0 || j->h <= 0 || (JDIMENSION)(j->x + j->w) > cinfo.image_width
        || (JDIMENSION)(j->y + j->h) > cinfo.image_height || j->out_rows < j->h
        || j->out_cols < j->w + 31) {
        jpeg_destroy_decompress(&cinfo);
        return BAD_BOX;
    }
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = JDCT_IFAST;
    cinfo.do_fancy_upsampling = FALSE;
    jpeg_start_decompress(&cinfo);
    j->left = (JDIMENSION)j->x;
    j->width = (JDIMENSION)j->w;
    /* rounds left down to an iMCU column (at most 32 pixels: the 31 spare columns of out) */
    jpeg_crop_scanline(&cinfo, &j->left, &j->width);
    if (j->y > 0)
        jpeg_skip_scanlines(&cinfo, (JDIMENSION)j->y);
    for (int done = 0; done < j->h;) {
        int n = j->h - done < ROWS_PER_READ ? j->h - done : ROWS_PER_READ;
        for (int r = 0; r < n; r++)
            rows[r] = j->out + (done + r) * j->stride;
        JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)n);
        if (got == 0) {
            result = FAILED;
            snprintf(j->message, sizeof(j->message), "no scanline after row %d", j->y + done);
            jpeg_destroy_decompress(&cinfo);
            return result;
        }
        done += (int)got;
    }
    /* the rows below the box are left unread: jpeg_abort (in destroy) drops the decoder mid-image */
    jpeg_destroy_decompress(&cinfo);
    return DECODED;
}

static PyObject *decode_crop(PyObject *self, PyObject *args)
{
    Py_buffer data, out;
    job j;
    enum outcome outcome;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*iiiiw*", &data, &j.x, &j.y, &j.w, &j.h, &out))
        return NULL;
    memset(j.message, 0, sizeof(j.message));
    j.data = (const unsigned char *)data.buf;
    j.size = (unsigned long)data.len;
    j.out = (unsigned char *)out.buf;
    /* out is C-contiguous rows x cols x 3 uint8; its shape comes from the caller's arguments */
    j.stride = 3 * (Py_ssize_t)(j.w + 32);
    j.out_cols = j.w + 32;
    j.out_rows = j.stride > 0 ? out.len / j.stride : 0;
    Py_BEGIN_ALLOW_THREADS
    outcome = decode_box(&j);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    switch (outcome) {
    case DECODED:
        return Py_BuildValue("(II)", (unsigned int)j.left, (unsigned int)j.width);
    case BAD_BOX:
        PyErr_Format(PyExc_ValueError,
                     "box (%d, %d, %d, %d) is not inside the image, or out is smaller than %d rows of "
                     "%d pixels",
                     j.x, j.y, j.w, j.h, j.h, j.w + 32);
        return NULL;
    case NOT_RGB:
        PyErr_SetString(PyExc_NotImplementedError, "CMYK or YCCK JPEG: no RGB region decode");
        return NULL;
    default:
        PyErr_Format(PyExc_ValueError, "libjpeg-turbo: %s", j.message[0] ? j.message : "decode failed");
        return NULL;
    }
}

static PyMethodDef methods[] = {
    {"decode_crop", decode_crop, METH_VARARGS,
     "decode_crop(jpeg, x, y, w, h, out) -> (left, width)\n\n"
     "Decode the rows y .. y+h-1 of a JPEG, columns [left, left + width) (left: x rounded down to an "
     "iMCU column), as RGB into out, a writable C-contiguous uint8 buffer of h rows of w + 32 "
     "pixels. The box itself is out[:, x - left : x - left + w]. Raises NotImplementedError for "
     "CMYK and YCCK JPEGs and ValueError for anything libjpeg-turbo refuses (warnings included)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cropdecode", "libjpeg-turbo region-of-interest decode", -1, methods,
};

PyMODINIT_FUNC PyInit__cropdecode(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "LIBJPEG_TURBO_VERSION_NUMBER", LIBJPEG_TURBO_VERSION_NUMBER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
