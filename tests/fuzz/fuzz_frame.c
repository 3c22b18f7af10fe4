/* fuzz_frame.c - hostile bytes through the frame reader and envelope decoding.
 *
 * The first input byte chooses how the rest is split into feeds (1..256
 * bytes at a time), so libFuzzer explores every split of a frame stream;
 * each complete frame is unpacked as a Request and freed, as the daemon
 * will. Built as a libFuzzer target with -DOML_FUZZ=ON (clang), and always
 * as a replay program that runs the committed corpus under ctest. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "frame.h"
#include "omld.pb-c.h"

#define FUZZ_MAX_FRAME (64u * 1024u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t step = (size_t)data[0] + 1;
    data++;
    size--;
    oml_frame_reader r;
    if (oml_frame_reader_init(&r, FUZZ_MAX_FRAME) != 0)
        abort();
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        if (oml_frame_reader_feed(&r, data + off, n) < 0)
            break;
        const uint8_t *frame;
        size_t len;
        int rc;
        while ((rc = oml_frame_reader_next(&r, &frame, &len)) == 1) {
            if (len > FUZZ_MAX_FRAME)
                abort(); /* the reader must never hand out an oversized frame */
            Omld__Request *req = omld__request__unpack(NULL, len, frame);
            if (req != NULL)
                omld__request__free_unpacked(req, NULL);
        }
        if (rc < 0)
            break;
        if (oml_frame_reader_buffered(&r) > FUZZ_MAX_FRAME + OML_FRAME_HEADER_BYTES)
            abort(); /* the input bound must hold */
    }
    oml_frame_reader_free(&r);
    return 0;
}

#ifndef OML_LIBFUZZER
/* Replay: run every file named on the command line, each with a few split
 * choices in front. Exit status 0 unless a check aborts. */
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            fprintf(stderr, "fuzz_frame: cannot open %s\n", argv[i]);
            return 1;
        }
        uint8_t buf[1 + 65536];
        size_t n = fread(buf + 1, 1, sizeof buf - 1, f);
        fclose(f);
        const uint8_t splits[] = {0, 1, 3, 255};
        for (size_t s = 0; s < sizeof splits; s++) {
            buf[0] = splits[s];
            LLVMFuzzerTestOneInput(buf, n + 1);
        }
    }
    printf("fuzz_frame: replayed %d inputs\n", argc - 1);
    return 0;
}
#endif
