/* The Batsim 5 side of a socket run, in C as Batsim's is, for benchmarks/edc_vs_socket.py: a
 * ZeroMQ REQ socket connected to `batsched-ml serve`, the init frame (u32 size + init string),
 * then each frame of FRAMES (u32 size + bytes) sent and its reply received, as Batsim 5 does
 * (zmq_send, then a blocking receive). libzmq is loaded at run time (LIBZMQ: pyzmq's copy will
 * do), so no ZeroMQ headers are needed; the few declarations used are ZeroMQ's stable C API.
 *
 *     edc_socket_client LIBZMQ ENDPOINT INIT_STRING FRAMES REPLIES
 *
 * REPLIES is written as tests/edc_driver.c writes it (u32 flags, then u32 size + bytes of the
 * hello and of each reply). Prints the seconds to the hello and in the messages. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ZMQ_REQ 3
#define ZMQ_LINGER 17
#define REPLY_MAX (64u << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s LIBZMQ ENDPOINT INIT_STRING FRAMES REPLIES\n", argv[0]);
        return 2;
    }
    void *zmq = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (zmq == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    void *(*ctx_new)(void) = (void *(*)(void))dlsym(zmq, "zmq_ctx_new");
    void *(*new_socket)(void *, int) = (void *(*)(void *, int))dlsym(zmq, "zmq_socket");
    int (*setsockopt)(void *, int, const void *, size_t) =
        (int (*)(void *, int, const void *, size_t))dlsym(zmq, "zmq_setsockopt");
    int (*connect)(void *, const char *) = (int (*)(void *, const char *))dlsym(zmq, "zmq_connect");
    int (*send)(void *, const void *, size_t, int) =
        (int (*)(void *, const void *, size_t, int))dlsym(zmq, "zmq_send");
    int (*recv)(void *, void *, size_t, int) = (int (*)(void *, void *, size_t, int))dlsym(zmq, "zmq_recv");
    int (*close_socket)(void *) = (int (*)(void *))dlsym(zmq, "zmq_close");
    if (!ctx_new || !new_socket || !setsockopt || !connect || !send || !recv || !close_socket) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 3;
    }
    FILE *frames = fopen(argv[4], "rb"), *replies = fopen(argv[5], "wb");
    uint8_t *reply = malloc(REPLY_MAX);
    if (frames == NULL || replies == NULL || reply == NULL) {
        perror("frames, replies or memory");
        return 2;
    }
    void *context = ctx_new();
    void *req = new_socket(context, ZMQ_REQ);
    int linger = 0;
    if (req == NULL || setsockopt(req, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        connect(req, argv[2]) != 0) {
        fprintf(stderr, "cannot connect to %s\n", argv[2]);
        return 3;
    }
    double started = now();
    uint32_t init_size = (uint32_t)strlen(argv[3]);
    uint8_t *init = malloc(4 + init_size);
    memcpy(init, &init_size, 4);
    memcpy(init + 4, argv[3], init_size);
    if (send(req, init, 4 + init_size, 0) < 0) return 4;
    int size = recv(req, reply, REPLY_MAX, 0);
    if (size < 4 || (uint32_t)size > REPLY_MAX) return 4;
    double to_hello = now() - started;
    uint32_t hello_size = (uint32_t)size - 4;
    fwrite(reply, 4, 1, replies);
    fwrite(&hello_size, 4, 1, replies);
    fwrite(reply + 4, 1, hello_size, replies);
    double in_messages = 0.0;
    uint32_t frame_size;
    while (fread(&frame_size, 4, 1, frames) == 1) {
        uint8_t *frame = malloc(frame_size);
        if (frame == NULL || fread(frame, 1, frame_size, frames) != frame_size) return 2;
        started = now();
        if (send(req, frame, frame_size, 0) < 0) return 4;
        size = recv(req, reply, REPLY_MAX, 0);
        in_messages += now() - started;
        free(frame);
        if (size < 0 || (uint32_t)size > REPLY_MAX) return 4;
        uint32_t out = (uint32_t)size;
        fwrite(&out, 4, 1, replies);
        fwrite(reply, 1, out, replies);
    }
    close_socket(req);
    fclose(replies);
    printf("%.6f %.6f\n", to_hello, in_messages);
    return 0;
}
