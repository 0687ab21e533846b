/*
 * chat.c - a multi-turn spoken conversation through the audio.cpp-compatible C ABI.
 *
 * Each question is a WAV file (PCM 16/24/32-bit or float, any rate, any channel count). Every
 * turn's request carries the whole conversation so far, as audio.cpp's lfm2_audio family
 * expects: per earlier turn its question (CUSTOM "lfm2_audio.question", the WAV bytes) and the
 * reply artifact that turn returned (ACOUSTIC_TOKENS "lfm2_audio.reply", with its meta).
 * Each reply is written as OUT_DIR/turnN.wav (24 kHz mono float) and its text printed.
 *
 *   cc chat.c $(pkg-config --cflags --libs audiocpp) -o chat
 *   ./chat [--stream] [--max-tokens N] [--seed S] MODEL_DIR OUT_DIR q1.wav [q2.wav ...]
 *
 * MODEL_DIR is a package directory with the four GGUF files of LFM2.5-Audio. With --stream
 * each reply is pulled event by event (its text printed as it comes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audiocpp.h"
#include "lfm2e.h"

static void die(const char * what, audiocpp_status st) {
    fprintf(stderr, "%s: %s: %s\n", what, audiocpp_status_string(st), audiocpp_last_error());
    exit(1);
}

#define TRY(call)                                                                             \
    do {                                                                                      \
        audiocpp_status st_ = (call);                                                         \
        if (st_ != AUDIOCPP_OK) die(#call, st_);                                              \
    } while (0)

static void * xmalloc(size_t n) {
    void * p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- WAV in and out ----------------------------------------------------------------------- */

typedef struct wav {
    unsigned char * bytes; /* the file as read: sent back as the question's artifact */
    size_t len;
    float * samples;       /* interleaved */
    size_t frames;
    int rate;
    int channels;
} wav;

static uint32_t u32le(const unsigned char * p) {
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) |
           ((uint32_t) p[3] << 24);
}

static uint16_t u16le(const unsigned char * p) {
    return (uint16_t) (p[0] | (p[1] << 8));
}

static int read_wav(const char * path, wav * w) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        return 0;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    w->bytes = (unsigned char *) xmalloc((size_t) n);
    w->len = fread(w->bytes, 1, (size_t) n, f);
    fclose(f);
    const unsigned char * b = w->bytes;
    if (w->len < 12 || memcmp(b, "RIFF", 4) != 0 || memcmp(b + 8, "WAVE", 4) != 0) {
        return 0;
    }
    int format = 0, bits = 0;
    const unsigned char * data = NULL;
    size_t data_len = 0;
    for (size_t at = 12; at + 8 <= w->len;) {
        uint32_t size = u32le(b + at + 4);
        const unsigned char * body = b + at + 8;
        if (size > w->len - at - 8) {
            size = (uint32_t) (w->len - at - 8);
        }
        if (memcmp(b + at, "fmt ", 4) == 0 && size >= 16) {
            format = u16le(body);
            w->channels = u16le(body + 2);
            w->rate = (int) u32le(body + 4);
            bits = u16le(body + 14);
            if (format == 0xFFFE && size >= 26) {
                format = u16le(body + 24); /* WAVE_FORMAT_EXTENSIBLE: the sub-format */
            }
        } else if (memcmp(b + at, "data", 4) == 0) {
            data = body;
            data_len = size;
        }
        at += 8 + size + (size & 1);
    }
    if (!data || w->channels <= 0 || w->rate <= 0 || !(format == 1 || format == 3)) {
        return 0;
    }
    int bytes = bits / 8;
    if (bytes <= 0 || (format == 3 && bits != 32)) {
        return 0;
    }
    size_t count = data_len / (size_t) bytes;
    w->frames = count / (size_t) w->channels;
    w->samples = (float *) xmalloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        const unsigned char * s = data + i * (size_t) bytes;
        if (format == 3) {
            memcpy(&w->samples[i], s, 4);
        } else {
            /* integer PCM, full scale 2^(bits-1); 8-bit WAVs are unsigned */
            int64_t v = 0;
            for (int k = bytes - 1; k >= 0; k--) {
                v = (v << 8) | s[k];
            }
            if (bytes == 1) {
                v -= 128;
            } else if (v & ((int64_t) 1 << (bits - 1))) {
                v -= (int64_t) 1 << bits;
            }
            w->samples[i] = (float) ((double) v / (double) ((int64_t) 1 << (bits - 1)));
        }
    }
    return 1;
}

static void put32(FILE * f, uint32_t v) {
    unsigned char b[4] = { (unsigned char) v, (unsigned char) (v >> 8), (unsigned char) (v >> 16),
                           (unsigned char) (v >> 24) };
    fwrite(b, 1, 4, f);
}

static void put16(FILE * f, uint16_t v) {
    unsigned char b[2] = { (unsigned char) v, (unsigned char) (v >> 8) };
    fwrite(b, 1, 2, f);
}

static int write_wav(const char * path, const float * samples, size_t frames, int rate) {
    FILE * f = fopen(path, "wb");
    if (!f) {
        return 0;
    }
    uint32_t data = (uint32_t) (frames * 4);
    fwrite("RIFF", 1, 4, f);
    put32(f, 36 + data);
    fwrite("WAVEfmt ", 1, 8, f);
    put32(f, 16);
    put16(f, 3); /* IEEE float */
    put16(f, 1);
    put32(f, (uint32_t) rate);
    put32(f, (uint32_t) rate * 4);
    put16(f, 4);
    put16(f, 32);
    fwrite("data", 1, 4, f);
    put32(f, data);
    fwrite(samples, 4, frames, f);
    return fclose(f) == 0;
}

/* ---- the conversation --------------------------------------------------------------------- */

/* A reply artifact copied out of its result (the result is freed after each turn). */
typedef struct reply {
    void * payload;
    size_t bytes;
    size_t nmeta;
    char ** keys;
    char ** values;
} reply;

static char * dup(const char * s) {
    char * p = (char *) xmalloc(strlen(s) + 1);
    strcpy(p, s);
    return p;
}

static reply keep_reply(const audiocpp_result * res) {
    reply r;
    memset(&r, 0, sizeof r);
    for (size_t i = 0; i < audiocpp_result_artifact_count(res); i++) {
        audiocpp_artifact_kind kind;
        const char * id;
        const void * payload;
        size_t bytes;
        TRY(audiocpp_result_artifact(res, i, &kind, &id, &payload, &bytes));
        if (kind != AUDIOCPP_ARTIFACT_ACOUSTIC_TOKENS || strcmp(id, "lfm2_audio.reply") != 0) {
            continue;
        }
        r.payload = xmalloc(bytes);
        memcpy(r.payload, payload, bytes);
        r.bytes = bytes;
        r.nmeta = audiocpp_result_artifact_meta_count(res, i);
        r.keys = (char **) xmalloc(r.nmeta * sizeof(char *));
        r.values = (char **) xmalloc(r.nmeta * sizeof(char *));
        for (size_t k = 0; k < r.nmeta; k++) {
            const char * key;
            const char * value;
            TRY(audiocpp_result_artifact_meta(res, i, k, &key, &value));
            r.keys[k] = dup(key);
            r.values[k] = dup(value);
        }
    }
    return r;
}

static void free_reply(reply * r) {
    for (size_t k = 0; k < r->nmeta; k++) {
        free(r->keys[k]);
        free(r->values[k]);
    }
    free(r->keys);
    free(r->values);
    free(r->payload);
}

/* One turn, streamed: the question pushed in chunks, the reply pulled event by event. */
static audiocpp_result * stream_turn(audiocpp_session * s, const audiocpp_request * req,
                                     const wav * q) {
    TRY(audiocpp_stream_start(s, req));
    double seconds = 0;
    int64_t samples = 0;
    TRY(audiocpp_stream_policy(s, NULL, NULL, &samples, &seconds));
    size_t chunk = seconds > 0 ? (size_t) (seconds * q->rate + 0.5) : (size_t) samples;
    for (size_t f = 0; f < q->frames; f += chunk) {
        size_t n = q->frames - f < chunk ? q->frames - f : chunk;
        TRY(audiocpp_stream_push(s, q->samples + f * (size_t) q->channels, n, q->rate, q->channels,
                                 (int64_t) f, NULL));
    }
    for (;;) {
        audiocpp_event * ev = NULL;
        TRY(audiocpp_stream_next_event(s, &ev));
        if (!ev) {
            break;
        }
        const char * text;
        if (audiocpp_result_text(audiocpp_event_as_result(ev), &text, NULL) == AUDIOCPP_OK) {
            fputs(text, stdout);
            fflush(stdout);
        }
        audiocpp_event_free(ev);
    }
    audiocpp_result * res = NULL;
    TRY(audiocpp_stream_finish(s, &res));
    return res;
}

int main(int argc, char ** argv) {
    int stream = 0;
    const char * max_tokens = "512";
    const char * seed = "0";
    int a = 1;
    for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
        if (strcmp(argv[a], "--stream") == 0) {
            stream = 1;
        } else if (strcmp(argv[a], "--max-tokens") == 0 && a + 1 < argc) {
            max_tokens = argv[++a];
        } else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc) {
            seed = argv[++a];
        } else {
            fprintf(stderr, "unknown option %s\n", argv[a]);
            return 2;
        }
    }
    if (argc - a < 3) {
        fprintf(stderr,
                "usage: %s [--stream] [--max-tokens N] [--seed S] MODEL_DIR OUT_DIR q1.wav ...\n",
                argv[0]);
        return 2;
    }
    const char * model_dir = argv[a];
    const char * out_dir = argv[a + 1];
    int nq = argc - a - 2;
    char ** questions = argv + a + 2;
    if ((audiocpp_abi_version() >> 16) != AUDIOCPP_ABI_VERSION_MAJOR) {
        fprintf(stderr, "libaudiocpp has another ABI major version\n");
        return 1;
    }

    audiocpp_registry * reg = NULL;
    TRY(audiocpp_registry_create(NULL, &reg));
    audiocpp_model_config cfg = { "lfm2_audio", NULL, NULL, NULL };
    audiocpp_model * model = NULL;
    TRY(audiocpp_model_load(reg, model_dir, &cfg, NULL, &model));
    printf("%s\n", audiocpp_model_description(model));
    audiocpp_backend_config cpu = { "cpu", 0, 1 };
    audiocpp_session * s = NULL;
    TRY(audiocpp_session_create(model, "s2s", stream ? "streaming" : "offline", &cpu, NULL, &s));
    /* The session keeps what it needs; the model and registry handles can go. */
    audiocpp_model_free(model);
    audiocpp_registry_free(reg);

    wav * qs = (wav *) xmalloc((size_t) nq * sizeof(wav));
    reply * replies = (reply *) xmalloc((size_t) nq * sizeof(reply));
    for (int t = 0; t < nq; t++) {
        memset(&qs[t], 0, sizeof qs[t]);
        if (!read_wav(questions[t], &qs[t])) {
            fprintf(stderr, "%s: not a WAV this example reads\n", questions[t]);
            return 1;
        }
        audiocpp_request * req = audiocpp_request_create();
        TRY(audiocpp_request_set_audio(req, qs[t].samples, qs[t].frames, qs[t].rate,
                                       qs[t].channels));
        TRY(audiocpp_request_set_option(req, "max_tokens", max_tokens));
        TRY(audiocpp_request_set_option(req, "seed", seed));
        for (int j = 0; j < t; j++) {
            TRY(audiocpp_request_add_artifact(req, AUDIOCPP_ARTIFACT_CUSTOM, "lfm2_audio.question",
                                              qs[j].bytes, qs[j].len, NULL));
            size_t at = 0;
            TRY(audiocpp_request_add_artifact(req, AUDIOCPP_ARTIFACT_ACOUSTIC_TOKENS,
                                              "lfm2_audio.reply", replies[j].payload,
                                              replies[j].bytes, &at));
            for (size_t k = 0; k < replies[j].nmeta; k++) {
                TRY(audiocpp_request_set_artifact_meta(req, at, replies[j].keys[k],
                                                       replies[j].values[k]));
            }
        }
        printf("turn %d (%s): ", t + 1, questions[t]);
        fflush(stdout);
        audiocpp_result * res = NULL;
        if (stream) {
            res = stream_turn(s, req, &qs[t]);
        } else {
            TRY(audiocpp_session_run(s, req, &res));
            const char * text;
            TRY(audiocpp_result_text(res, &text, NULL));
            fputs(text, stdout);
        }
        audiocpp_request_free(req);
        printf("\n");
        const float * audio;
        size_t frames;
        int rate, channels;
        TRY(audiocpp_result_audio(res, &audio, &frames, &rate, &channels));
        char path[4096];
        snprintf(path, sizeof path, "%s/turn%d.wav", out_dir, t + 1);
        if (!write_wav(path, audio, frames, rate)) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        replies[t] = keep_reply(res);
        size_t resumed = 0, reused = 0;
        TRY(lfm2e_session_cache_figures(s, &resumed, &reused));
        printf("  %.2f s of audio in %s; prefill resumed %zu positions, reused %zu questions\n",
               (double) frames / rate, path, resumed, reused);
        audiocpp_result_free(res);
    }
    for (int t = 0; t < nq; t++) {
        free(qs[t].bytes);
        free(qs[t].samples);
        free_reply(&replies[t]);
    }
    free(qs);
    free(replies);
    audiocpp_session_free(s);
    return 0;
}
