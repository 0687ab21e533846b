/* Helpers shared by the C test programs: checks that report the library's last error, raw PCM
 * and file I/O, a float WAV writer. */
#ifndef SUITE_H
#define SUITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audiocpp.h"
#include "lfm2e.h"

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, audiocpp_last_error());                                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#define OK(call)                                                                              \
    do {                                                                                      \
        audiocpp_status st_ = (call);                                                         \
        if (st_ != AUDIOCPP_OK) {                                                             \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,               \
                    audiocpp_status_string(st_), audiocpp_last_error());                      \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Interleaved float PCM. */
typedef struct pcm {
    float * samples;
    size_t frames;
    int rate;
    int channels;
} pcm;

static void * xmalloc(size_t n) {
    void * p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static char * path_join(const char * dir, const char * name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char * p = (char *) xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static unsigned char * read_file(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char * data = (unsigned char *) xmalloc((size_t) n);
    if (n > 0 && fread(data, 1, (size_t) n, f) != (size_t) n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *len = (size_t) n;
    return data;
}

static void write_file(const char * dir, const char * name, const void * data, size_t len) {
    char * path = path_join(dir, name);
    FILE * f = fopen(path, "wb");
    if (!f || (len > 0 && fwrite(data, 1, len, f) != len)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    free(path);
}

static void write_text(const char * dir, const char * name, const char * text) {
    write_file(dir, name, text, strlen(text));
}

/* Raw PCM files: int32 rate, int32 channels, then the interleaved float samples. */
static pcm read_pcm(const char * dir, const char * name) {
    char * path = path_join(dir, name);
    size_t len = 0;
    unsigned char * data = read_file(path, &len);
    free(path);
    CHECK(len >= 8);
    int32_t head[2];
    memcpy(head, data, 8);
    pcm p;
    p.rate = head[0];
    p.channels = head[1];
    size_t n = (len - 8) / sizeof(float);
    p.frames = n / (size_t) p.channels;
    p.samples = (float *) xmalloc(n * sizeof(float));
    memcpy(p.samples, data + 8, n * sizeof(float));
    free(data);
    return p;
}

static void write_pcm(const char * dir, const char * name, const float * samples, size_t frames,
                      int rate, int channels) {
    size_t n = frames * (size_t) channels;
    unsigned char * data = (unsigned char *) xmalloc(8 + n * sizeof(float));
    int32_t head[2] = { rate, channels };
    memcpy(data, head, 8);
    if (n) {
        memcpy(data + 8, samples, n * sizeof(float));
    }
    write_file(dir, name, data, 8 + n * sizeof(float));
    free(data);
}

static void put_u32(unsigned char * p, uint32_t v) {
    p[0] = (unsigned char) (v & 0xff);
    p[1] = (unsigned char) ((v >> 8) & 0xff);
    p[2] = (unsigned char) ((v >> 16) & 0xff);
    p[3] = (unsigned char) ((v >> 24) & 0xff);
}

static void put_u16(unsigned char * p, uint16_t v) {
    p[0] = (unsigned char) (v & 0xff);
    p[1] = (unsigned char) ((v >> 8) & 0xff);
}

/* 32-bit float WAV bytes of interleaved PCM (caller frees). */
static unsigned char * wav_bytes(const pcm * p, size_t * len) {
    size_t data_bytes = p->frames * (size_t) p->channels * 4;
    unsigned char * w = (unsigned char *) xmalloc(44 + data_bytes);
    memcpy(w, "RIFF", 4);
    put_u32(w + 4, (uint32_t) (36 + data_bytes));
    memcpy(w + 8, "WAVEfmt ", 8);
    put_u32(w + 16, 16);
    put_u16(w + 20, 3); /* IEEE float */
    put_u16(w + 22, (uint16_t) p->channels);
    put_u32(w + 24, (uint32_t) p->rate);
    put_u32(w + 28, (uint32_t) (p->rate * p->channels * 4));
    put_u16(w + 32, (uint16_t) (p->channels * 4));
    put_u16(w + 34, 32);
    memcpy(w + 36, "data", 4);
    put_u32(w + 40, (uint32_t) data_bytes);
    if (data_bytes) {
        memcpy(w + 44, p->samples, data_bytes);
    }
    *len = 44 + data_bytes;
    return w;
}

#endif
