/* A Batsim 5 stand-in for the tests: loads an EDC library the way Batsim 5.0.0-rc2 does
 * (dlopen RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND, the three symbols by dlsym), calls
 * batsim_edc_init with an init string, batsim_edc_take_decisions with each recorded message,
 * batsim_edc_deinit at the end.
 *
 *     edc_driver LIBRARY INIT_STRING FRAMES REPLIES [INIT_STRING FRAMES REPLIES ...]
 *
 * One simulation per (INIT_STRING, FRAMES, REPLIES), in turn in this process, the library
 * loaded for each and closed after its deinit, as Batsim does once. FRAMES: Batsim's messages,
 * each a little-endian u32 size then that many bytes (the JSON text and its NUL, as Batsim
 * passes them). REPLIES (written): the flags as u32, then the hello and each reply the same
 * way (u32 size + bytes, the NUL included). Prints one line per simulation on stdout: the
 * seconds spent in the library's calls (init, then all take_decisions). Exit 0 when every call
 * returned 0, else 10 + the failing call's kind (0 init, 1 take_decisions, 2 deinit), after
 * writing what came before and running no further simulation; 2 for a usage or file error, 3
 * for a loading error. EDC_DRIVER_LOAD_METHOD=dlmopen loads as batsim --edc-library-load-method
 * dlmopen does (dlmopen LM_ID_NEWLM, the same flags). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef uint8_t (*init_f)(const uint8_t *, uint32_t, uint32_t *, uint8_t **, uint32_t *);
typedef uint8_t (*take_f)(const uint8_t *, uint32_t, uint8_t **, uint32_t *);
typedef uint8_t (*deinit_f)(void);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int put(FILE *out, const uint8_t *data, uint32_t size) {
    return fwrite(&size, 4, 1, out) == 1 && fwrite(data, 1, size, out) == size ? 0 : -1;
}

static int simulate(const char *path, const char *init_string, const char *frames_path,
                    const char *replies_path) {
    const char *method = getenv("EDC_DRIVER_LOAD_METHOD");
    void *library = method != NULL && strcmp(method, "dlmopen") == 0
                        ? dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)
                        : dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (library == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    init_f init = (init_f)dlsym(library, "batsim_edc_init");
    take_f take = (take_f)dlsym(library, "batsim_edc_take_decisions");
    deinit_f deinit = (deinit_f)dlsym(library, "batsim_edc_deinit");
    if (init == NULL || take == NULL || deinit == NULL) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 3;
    }
    FILE *frames = fopen(frames_path, "rb"), *replies = fopen(replies_path, "wb");
    if (frames == NULL || replies == NULL) {
        perror("frames or replies");
        return 2;
    }
    uint32_t init_size = 0;
    while (init_string[init_size] != '\0') init_size++;
    uint32_t flags = 0, size = 0;
    uint8_t *data = NULL;
    double started = now();
    if (init((const uint8_t *)init_string, init_size, &flags, &data, &size) != 0) return 10;
    double in_init = now() - started;
    if (fwrite(&flags, 4, 1, replies) != 1 || put(replies, data, size) != 0) return 2;
    double in_take = 0.0;
    uint32_t frame_size;
    while (fread(&frame_size, 4, 1, frames) == 1) {
        uint8_t *frame = malloc(frame_size);
        if (frame == NULL || fread(frame, 1, frame_size, frames) != frame_size) return 2;
        started = now();
        uint8_t code = take(frame, frame_size, &data, &size);
        in_take += now() - started;
        free(frame);
        if (code != 0) {
            fclose(replies);
            return 11;
        }
        if (put(replies, data, size) != 0) return 2;
    }
    fclose(frames);
    if (deinit() != 0) return 12;
    if (fclose(replies) != 0) return 2;
    dlclose(library);
    printf("%.6f %.6f\n", in_init, in_take);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5 || (argc - 2) % 3 != 0) {
        fprintf(stderr, "usage: %s LIBRARY INIT_STRING FRAMES REPLIES [INIT_STRING FRAMES REPLIES ...]\n",
                argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i += 3) {
        int code = simulate(argv[1], argv[i], argv[i + 1], argv[i + 2]);
        if (code != 0) return code;
    }
    return 0;
}
