/*
 * audiocpp.h - C interface of lfm2-engine, compatible with audio.cpp's C ABI 0.2.0.
 *
 * This header is written for lfm2-engine (a Rust inference engine for LiquidAI's LFM2-Audio).
 * Its names, signatures, enum values and struct layouts are those of audio.cpp's ABI 0.2.0, so
 * programs written against that ABI build and run against this library unchanged
 * (`-laudiocpp`, or `pkg-config --cflags --libs audiocpp`). The one model family is
 * `lfm2_audio` (tasks asr, tts, s2s); what the family does not have answers with a zero count,
 * AUDIOCPP_ERR_NOT_AVAILABLE or AUDIOCPP_ERR_INVALID_ARGUMENT as described below.
 * Extensions of this implementation live in `lfm2e.h` under the `lfm2e_` prefix.
 *
 * Conventions (they hold for every function unless its comment says otherwise):
 * - Handles are opaque. Each handle keeps what it was made from alive (a session its model and
 *   registry, a model its registry), so handles may be freed in any order. Every *_free
 *   accepts NULL.
 * - A handle is not thread-safe; separate handles may be used from separate threads at once.
 * - Fallible calls return an audiocpp_status. On failure, audiocpp_last_error() (thread-local)
 *   says why; a fallible call clears it on entry. No panic or exception crosses this interface.
 * - Returned pointers (strings, samples, payloads) are borrowed from the handle that returned
 *   them and stay valid until that handle is freed or changed; copy what you keep. Returned
 *   strings are never NULL ("" when empty) except where a comment says so.
 * - Out-parameters are optional (NULL = not wanted) unless a comment says "required".
 * - Everything passed in (strings, samples, payloads, option maps) is copied at the call.
 * - Strings in and out, file paths included, are UTF-8.
 */
#ifndef AUDIOCPP_H
#define AUDIOCPP_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && !defined(AUDIOCPP_STATIC)
#  ifdef AUDIOCPP_BUILD
#    define AUDIOCPP_API __declspec(dllexport)
#  else
#    define AUDIOCPP_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define AUDIOCPP_API __attribute__((visibility("default")))
#else
#  define AUDIOCPP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versioning --------------------------------------------------------------------------- */

#define AUDIOCPP_ABI_VERSION_MAJOR 0
#define AUDIOCPP_ABI_VERSION_MINOR 2
#define AUDIOCPP_ABI_VERSION_PATCH 0

/* (major << 16) | (minor << 8) | patch of the library at run time. Refuse a different major;
 * the minor grows when entry points are added; the patch only carries fixes. */
AUDIOCPP_API uint32_t audiocpp_abi_version(void);
/* This library's own version (static string), e.g. "lfm2-engine 0.1.0". */
AUDIOCPP_API const char * audiocpp_build_version(void);

/* ---- Status codes and errors -------------------------------------------------------------- */

typedef enum audiocpp_status {
    AUDIOCPP_OK = 0,
    AUDIOCPP_ERR_INVALID_ARGUMENT = 1,   /* NULL required argument, bad enum value or token, bad
                                            option (unknown, not taken by the task, mistyped, out
                                            of range), unusable audio or artifact, a conversation
                                            over its capacity, a call out of order */
    AUDIOCPP_ERR_UNSUPPORTED_FAMILY = 2, /* model_load: family_hint is not in the registry */
    AUDIOCPP_ERR_LOAD_FAILED = 3,        /* model_load: the model could not be loaded */
    AUDIOCPP_ERR_RUNTIME = 4,            /* a failure while running (also: a cancelled run) */
    AUDIOCPP_ERR_OUT_OF_MEMORY = 5,      /* an allocation failed */
    AUDIOCPP_ERR_OUT_OF_RANGE = 6,       /* index >= count in an indexed accessor */
    AUDIOCPP_ERR_NOT_AVAILABLE = 7       /* the result has no such output; session_run on a
                                            streaming session; stream_* on an offline session;
                                            a task, mode or backend this build does not have */
} audiocpp_status;

/* Why the last fallible call of this thread failed ("" after a success). Never NULL; valid
 * until this thread's next call into the library. */
AUDIOCPP_API const char * audiocpp_last_error(void);
/* Static: "ok", "invalid argument", "unsupported family", "load failed", "runtime error",
 * "out of memory", "index out of range", "not available"; "unknown status" otherwise. */
AUDIOCPP_API const char * audiocpp_status_string(audiocpp_status status);

/* ---- Opaque handles ----------------------------------------------------------------------- */

typedef struct audiocpp_registry audiocpp_registry;
typedef struct audiocpp_model    audiocpp_model;
typedef struct audiocpp_session  audiocpp_session;
typedef struct audiocpp_options  audiocpp_options;
typedef struct audiocpp_request  audiocpp_request;
typedef struct audiocpp_result   audiocpp_result;
typedef struct audiocpp_event    audiocpp_event;

/* ---- Options: a string -> string map ------------------------------------------------------ */

/* NULL if it cannot be allocated. */
AUDIOCPP_API audiocpp_options * audiocpp_options_create(void);
/* All arguments required; a later value for the same key replaces the earlier one. */
AUDIOCPP_API audiocpp_status audiocpp_options_set(audiocpp_options * options, const char * key,
                                                  const char * value);
AUDIOCPP_API void audiocpp_options_free(audiocpp_options * options);

/* ---- Registry and the task vocabulary ----------------------------------------------------- */

/* config_path: NULL (or "") = the built-in families; this build has no loader configuration
 * files (any other path: AUDIOCPP_ERR_NOT_AVAILABLE). out_registry required. */
AUDIOCPP_API audiocpp_status audiocpp_registry_create(const char * config_path,
                                                      audiocpp_registry ** out_registry);
AUDIOCPP_API void audiocpp_registry_free(audiocpp_registry * registry);
/* Number of model families (1: "lfm2_audio"); 0 for NULL. */
AUDIOCPP_API size_t audiocpp_registry_family_count(const audiocpp_registry * registry);
/* out_family required; AUDIOCPP_ERR_OUT_OF_RANGE past the count. */
AUDIOCPP_API audiocpp_status audiocpp_registry_family(const audiocpp_registry * registry,
                                                      size_t index, const char ** out_family);
/* The task tokens: vad, asr, diar, sep, gen, tts, clon, vc, s2s, align, vdes, spk, svc, midi. */
AUDIOCPP_API size_t audiocpp_task_count(void);
/* Static token; NULL when index is out of range. */
AUDIOCPP_API const char * audiocpp_task_name(size_t index);
/* A model spec's spelling of a task to its token (music, sfx, edit, audio_generation -> gen;
 * clone -> clon; design -> vdes; speaker -> spk; a token maps to itself); NULL if unknown. */
AUDIOCPP_API const char * audiocpp_task_from_spec_name(const char * spec_task);

/* ---- Model -------------------------------------------------------------------------------- */

typedef struct audiocpp_model_config {
    const char * family_hint;         /* NULL or "" = detect from the path; else a family name */
    const char * config_id;           /* lfm2_audio has no configs: NULL or "" */
    const char * weight_id;           /* the quantization to load when the directory holds
                                         several: "F32", "F16", "Q8_0" or "Q4_0"; NULL = the
                                         only one present */
    const char * model_spec_override; /* lfm2_audio takes no model spec: NULL or "" */
} audiocpp_model_config;

/* model_path: the package directory holding the four GGUF files of one quantization
 * (<model>-<q>.gguf, mmproj-, vocoder-, tokenizer-); a file path is refused. config and
 * load_options may be NULL (lfm2_audio has no load options: any key is refused).
 * out_model required (set to NULL first). AUDIOCPP_ERR_UNSUPPORTED_FAMILY for a family_hint
 * not in the registry, AUDIOCPP_ERR_LOAD_FAILED when the package cannot be loaded. */
AUDIOCPP_API audiocpp_status audiocpp_model_load(audiocpp_registry * registry,
                                                 const char * model_path,
                                                 const audiocpp_model_config * config,
                                                 const audiocpp_options * load_options,
                                                 audiocpp_model ** out_model);
AUDIOCPP_API void audiocpp_model_free(audiocpp_model * model);
/* "lfm2_audio"; "" for NULL. */
AUDIOCPP_API const char * audiocpp_model_family(const audiocpp_model * model);
/* One line: package, backend, language, S2S schedule; "" for NULL. */
AUDIOCPP_API const char * audiocpp_model_description(const audiocpp_model * model);
/* 1 if the model runs task in mode (asr offline; tts and s2s offline and streaming), else 0
 * (also for unknown tokens and NULL). */
AUDIOCPP_API int audiocpp_model_supports(const audiocpp_model * model, const char * task,
                                         const char * mode);
/* lfm2_audio: 0, 0, 0. */
AUDIOCPP_API int audiocpp_model_supports_timestamps(const audiocpp_model * model);
AUDIOCPP_API int audiocpp_model_supports_speaker_reference(const audiocpp_model * model);
AUDIOCPP_API int audiocpp_model_supports_style_condition(const audiocpp_model * model);
/* The checkpoint's language: 1 ("en", or "ja" for the JP checkpoint); 0 for NULL. */
AUDIOCPP_API size_t audiocpp_model_language_count(const audiocpp_model * model);
/* out_language required; AUDIOCPP_ERR_OUT_OF_RANGE past the count. */
AUDIOCPP_API audiocpp_status audiocpp_model_language(const audiocpp_model * model, size_t index,
                                                     const char ** out_language);

typedef enum audiocpp_option_scope {
    AUDIOCPP_OPTION_SCOPE_REQUEST = 0,
    AUDIOCPP_OPTION_SCOPE_SESSION = 1,
    AUDIOCPP_OPTION_SCOPE_LOAD = 2
} audiocpp_option_scope;

/* Options the model takes in a scope; 0 for NULL or a bad scope. */
AUDIOCPP_API size_t audiocpp_model_option_count(const audiocpp_model * model,
                                                audiocpp_option_scope scope);
/* One option: name, value type (INT, FLOAT, BOOL, STRING, PATH or a|b|c), description (which
 * tasks take it), default, minimum, maximum ("" where not declared), required (0/1).
 * All outs optional; AUDIOCPP_ERR_OUT_OF_RANGE past the count. */
AUDIOCPP_API audiocpp_status audiocpp_model_option(const audiocpp_model * model,
                                                   audiocpp_option_scope scope, size_t index,
                                                   const char ** out_name,
                                                   const char ** out_value_name,
                                                   const char ** out_description,
                                                   const char ** out_default_value,
                                                   const char ** out_min_value,
                                                   const char ** out_max_value,
                                                   int * out_required);

/* ---- Session ------------------------------------------------------------------------------ */

typedef struct audiocpp_backend_config {
    const char * backend; /* NULL or "cpu" (also "best": the CPU in this build); "cuda", "hip",
                             "rocm", "vulkan", "metal": AUDIOCPP_ERR_NOT_AVAILABLE */
    int          device;  /* 0 */
    int          threads; /* compute threads of this session, > 0 */
} audiocpp_backend_config;

/* task: "asr", "tts" or "s2s"; mode: "offline" or "streaming" (tts and s2s). backend NULL =
 * cpu, device 0, 1 thread. session_options may be NULL. out_session required. Another known
 * task token or mode the family lacks: AUDIOCPP_ERR_NOT_AVAILABLE; an unknown token, option or
 * value: AUDIOCPP_ERR_INVALID_ARGUMENT. */
AUDIOCPP_API audiocpp_status audiocpp_session_create(const audiocpp_model * model,
                                                     const char * task, const char * mode,
                                                     const audiocpp_backend_config * backend,
                                                     const audiocpp_options * session_options,
                                                     audiocpp_session ** out_session);
AUDIOCPP_API void audiocpp_session_free(audiocpp_session * session);
/* "lfm2_audio"; "" for NULL. */
AUDIOCPP_API const char * audiocpp_session_family(const audiocpp_session * session);
/* Optional: checks request (may be NULL) ahead of a run. */
AUDIOCPP_API audiocpp_status audiocpp_session_prepare(audiocpp_session * session,
                                                      const audiocpp_request * request);
/* Runs request (NULL = an empty request) on an offline session (a streaming one:
 * AUDIOCPP_ERR_NOT_AVAILABLE). out_result required (set to NULL first); free it with
 * audiocpp_result_free. A session is reusable and keeps its caches between runs. */
AUDIOCPP_API audiocpp_status audiocpp_session_run(audiocpp_session * session,
                                                  const audiocpp_request * request,
                                                  audiocpp_result ** out_result);

/* ---- Request ------------------------------------------------------------------------------ */

/* NULL if it cannot be allocated. */
AUDIOCPP_API audiocpp_request * audiocpp_request_create(void);
AUDIOCPP_API void audiocpp_request_free(audiocpp_request * request);
/* The text (tts: what to speak; s2s: a typed question, in place of the audio) and its language
 * (nullable); a non-empty language also sets the request option "language". An s2s request
 * with both text and audio is AUDIOCPP_ERR_INVALID_ARGUMENT. */
AUDIOCPP_API audiocpp_status audiocpp_request_set_text(audiocpp_request * request,
                                                       const char * text, const char * language);
/* The text's language only (an empty text is created if there is none). */
AUDIOCPP_API audiocpp_status audiocpp_request_set_text_language(audiocpp_request * request,
                                                                const char * language);
/* Interleaved float PCM, any rate and channel count (asr input, s2s question); frames counts
 * per channel; frames == 0 is an empty buffer. sample_rate and channels > 0; samples may be
 * NULL only when frames == 0. */
AUDIOCPP_API audiocpp_status audiocpp_request_set_audio(audiocpp_request * request,
                                                        const float * samples, size_t frames,
                                                        int sample_rate, int channels);
/* A speaker reference (lfm2_audio has none: a request carrying one is refused at run). */
AUDIOCPP_API audiocpp_status audiocpp_request_set_voice_audio(audiocpp_request * request,
                                                              const float * samples,
                                                              size_t frames, int sample_rate,
                                                              int channels);
/* tts voice: "us_male" (default), "us_female", "uk_male", "uk_female". */
AUDIOCPP_API audiocpp_status audiocpp_request_set_voice_id(audiocpp_request * request,
                                                           const char * cached_voice_id);
/* Style conditioning (lfm2_audio has none: a request carrying any is refused at run). */
AUDIOCPP_API audiocpp_status audiocpp_request_set_style_language(audiocpp_request * request,
                                                                 const char * language);
AUDIOCPP_API audiocpp_status audiocpp_request_set_emotion(audiocpp_request * request,
                                                          const char * emotion);
AUDIOCPP_API audiocpp_status audiocpp_request_set_speaking_rate(audiocpp_request * request,
                                                                float value);
AUDIOCPP_API audiocpp_status audiocpp_request_set_pitch_shift(audiocpp_request * request,
                                                              float value);
AUDIOCPP_API audiocpp_status audiocpp_request_set_energy_scale(audiocpp_request * request,
                                                               float value);
AUDIOCPP_API audiocpp_status audiocpp_request_set_style_tag(audiocpp_request * request,
                                                            const char * key, const char * value);
/* A request option (see audiocpp_model_option, scope REQUEST); a later value replaces an
 * earlier one. Checked at run: unknown, not taken by the task, mistyped or out of range is
 * AUDIOCPP_ERR_INVALID_ARGUMENT naming the option. */
AUDIOCPP_API audiocpp_status audiocpp_request_set_option(audiocpp_request * request,
                                                         const char * key, const char * value);
/* A list-valued option (kept apart from the scalar ones; replaces; count == 0 is an empty
 * list; a NULL element fails before anything is written). lfm2_audio takes none. */
AUDIOCPP_API audiocpp_status audiocpp_request_set_option_array(audiocpp_request * request,
                                                               const char * key,
                                                               const char * const * values,
                                                               size_t count);

typedef enum audiocpp_artifact_kind {
    AUDIOCPP_ARTIFACT_SPEAKER_EMBEDDING = 0,
    AUDIOCPP_ARTIFACT_STYLE_EMBEDDING = 1,
    AUDIOCPP_ARTIFACT_PROMPT_EMBEDDING = 2,
    AUDIOCPP_ARTIFACT_ACOUSTIC_TOKENS = 3,
    AUDIOCPP_ARTIFACT_MIDI = 4,
    AUDIOCPP_ARTIFACT_TRANSCRIPT_ALIGNMENT = 5,
    AUDIOCPP_ARTIFACT_DIARIZATION_STATE = 6,
    AUDIOCPP_ARTIFACT_VAD_STATE = 7,
    AUDIOCPP_ARTIFACT_CUSTOM = 8
} audiocpp_artifact_kind;

/* Appends an input artifact (order matters: an s2s conversation's earlier turns, per turn its
 * question (CUSTOM, "lfm2_audio.question", WAV bytes) then its reply (ACOUSTIC_TOKENS,
 * "lfm2_audio.reply", as a result returned it, with its meta)). A typed question, or a
 * text-only reply the caller holds, is a CUSTOM artifact of that id whose payload is UTF-8 text
 * and whose meta "format" is "text" (audiocpp_request_set_artifact_meta). payload copied; NULL
 * only when payload_bytes == 0. out_index (optional) receives its index. */
AUDIOCPP_API audiocpp_status audiocpp_request_add_artifact(audiocpp_request * request,
                                                          audiocpp_artifact_kind kind,
                                                          const char * id, const void * payload,
                                                          size_t payload_bytes,
                                                          size_t * out_index);
/* Sets meta key = value on input artifact index (AUDIOCPP_ERR_OUT_OF_RANGE past the count). */
AUDIOCPP_API audiocpp_status audiocpp_request_set_artifact_meta(audiocpp_request * request,
                                                               size_t index, const char * key,
                                                               const char * value);

/* ---- Result (read-only) ------------------------------------------------------------------- */

/* Does nothing for the view audiocpp_event_as_result returns. */
AUDIOCPP_API void audiocpp_result_free(audiocpp_result * result);
/* Interleaved samples, frames per channel (lfm2_audio: 24000 Hz, 1 channel).
 * AUDIOCPP_ERR_NOT_AVAILABLE when the result has no audio (asr). */
AUDIOCPP_API audiocpp_status audiocpp_result_audio(const audiocpp_result * result,
                                                   const float ** out_samples,
                                                   size_t * out_frames, int * out_sample_rate,
                                                   int * out_channels);
/* The text and its language. AUDIOCPP_ERR_NOT_AVAILABLE when the result has no text (tts). */
AUDIOCPP_API audiocpp_status audiocpp_result_text(const audiocpp_result * result,
                                                  const char ** out_text,
                                                  const char ** out_language);
/* Timed segments, speaker turns, words, named audio: lfm2_audio produces none (count 0,
 * accessors AUDIOCPP_ERR_OUT_OF_RANGE). Sample offsets are at the result's sample rate. */
AUDIOCPP_API size_t audiocpp_result_segment_count(const audiocpp_result * result);
AUDIOCPP_API audiocpp_status audiocpp_result_segment(const audiocpp_result * result, size_t index,
                                                     int64_t * out_start_sample,
                                                     int64_t * out_end_sample,
                                                     float * out_confidence,
                                                     const char ** out_text);
AUDIOCPP_API size_t audiocpp_result_speaker_turn_count(const audiocpp_result * result);
AUDIOCPP_API audiocpp_status audiocpp_result_speaker_turn(const audiocpp_result * result,
                                                          size_t index,
                                                          int64_t * out_start_sample,
                                                          int64_t * out_end_sample,
                                                          const char ** out_speaker_id,
                                                          float * out_confidence,
                                                          const char ** out_text);
AUDIOCPP_API size_t audiocpp_result_word_count(const audiocpp_result * result);
AUDIOCPP_API audiocpp_status audiocpp_result_word(const audiocpp_result * result, size_t index,
                                                  const char ** out_word,
                                                  int64_t * out_start_sample,
                                                  int64_t * out_end_sample,
                                                  float * out_confidence);
AUDIOCPP_API size_t audiocpp_result_named_audio_count(const audiocpp_result * result);
AUDIOCPP_API audiocpp_status audiocpp_result_named_audio(const audiocpp_result * result,
                                                         size_t index, const char ** out_id,
                                                         const float ** out_samples,
                                                         size_t * out_frames,
                                                         int * out_sample_rate,
                                                         int * out_channels);
/* Output artifacts (s2s: the reply, ACOUSTIC_TOKENS "lfm2_audio.reply", to send back with the
 * next turn). Payload borrowed. */
AUDIOCPP_API size_t audiocpp_result_artifact_count(const audiocpp_result * result);
AUDIOCPP_API audiocpp_status audiocpp_result_artifact(const audiocpp_result * result,
                                                      size_t index,
                                                      audiocpp_artifact_kind * out_kind,
                                                      const char ** out_id,
                                                      const void ** out_payload,
                                                      size_t * out_payload_bytes);
/* Meta pairs of output artifact index (0 for a bad index); the order is stable for a result.
 * The reply's keys: format, language, codebooks, audio_vocab_size, text_vocab_size, steps,
 * ended ("true"/"false"). */
AUDIOCPP_API size_t audiocpp_result_artifact_meta_count(const audiocpp_result * result,
                                                        size_t index);
AUDIOCPP_API audiocpp_status audiocpp_result_artifact_meta(const audiocpp_result * result,
                                                           size_t index, size_t meta_index,
                                                           const char ** out_key,
                                                           const char ** out_value);

/* ---- Streaming (pull-based) --------------------------------------------------------------- */

typedef enum audiocpp_stream_input_kind {
    AUDIOCPP_STREAM_INPUT_NONE = 0,
    AUDIOCPP_STREAM_INPUT_AUDIO_CHUNKS = 1
} audiocpp_stream_input_kind;

typedef enum audiocpp_stream_output_kind {
    AUDIOCPP_STREAM_OUTPUT_FINAL_RESULT = 0,
    AUDIOCPP_STREAM_OUTPUT_PULL_EVENTS = 1
} audiocpp_stream_output_kind;

/* How to drive a streaming session: tts takes no input, s2s takes the question as audio
 * chunks; both give pull events. Preferred chunk: 1280 samples / 0.08 s (one frame) for s2s,
 * 0 for tts. */
AUDIOCPP_API audiocpp_status audiocpp_stream_policy(const audiocpp_session * session,
                                                    audiocpp_stream_input_kind * out_input,
                                                    audiocpp_stream_output_kind * out_output,
                                                    int64_t * out_preferred_chunk_samples,
                                                    double * out_preferred_chunk_seconds);
/* Checks request (may be NULL) and starts a stream, ending any stream in flight. */
AUDIOCPP_API audiocpp_status audiocpp_stream_start(audiocpp_session * session,
                                                   const audiocpp_request * request);
/* s2s: appends a chunk of the question (same rate and channels for every chunk; start_sample
 * = frames pushed so far). No event comes back (*out_event is set to NULL): the reply starts
 * when the question ends, at the first audiocpp_stream_next_event. */
AUDIOCPP_API audiocpp_status audiocpp_stream_push(audiocpp_session * session,
                                                  const float * samples, size_t frames,
                                                  int sample_rate, int channels,
                                                  int64_t start_sample,
                                                  audiocpp_event ** out_event);
/* The next event (waits for it); *out_event = NULL once the reply is over. out_event
 * required. An event carries stream_frames_per_event frames of 24 kHz audio and (s2s) the
 * text written since the previous event; the events of a stream concatenated equal its final
 * result. */
AUDIOCPP_API audiocpp_status audiocpp_stream_next_event(audiocpp_session * session,
                                                        audiocpp_event ** out_event);
/* Ends the stream and returns its result (out_result required). A reply still running is cut
 * where it is (its reply artifact then says ended = "false"); if no event was pulled at all,
 * the whole reply is generated first. */
AUDIOCPP_API audiocpp_status audiocpp_stream_finish(audiocpp_session * session,
                                                    audiocpp_result ** out_result);
/* Drops any stream in flight (the session stays usable). */
AUDIOCPP_API audiocpp_status audiocpp_stream_reset(audiocpp_session * session);
AUDIOCPP_API void audiocpp_event_free(audiocpp_event * event);
/* 1 for a final event; lfm2_audio's events are all partial (0). */
AUDIOCPP_API int audiocpp_event_is_final(const audiocpp_event * event);
/* The event read through the result accessors (borrowed, valid until the event is freed;
 * audiocpp_result_free on it does nothing). NULL for NULL. */
AUDIOCPP_API const audiocpp_result * audiocpp_event_as_result(const audiocpp_event * event);

typedef enum audiocpp_voice_activity_kind {
    AUDIOCPP_VOICE_ACTIVITY_SPEECH_START = 0,
    AUDIOCPP_VOICE_ACTIVITY_SPEECH_END = 1,
    AUDIOCPP_VOICE_ACTIVITY_SPEECH_SEGMENT = 2
} audiocpp_voice_activity_kind;

/* Voice activity of an event: lfm2_audio reports none (0; AUDIOCPP_ERR_OUT_OF_RANGE). */
AUDIOCPP_API size_t audiocpp_event_voice_activity_count(const audiocpp_event * event);
AUDIOCPP_API audiocpp_status audiocpp_event_voice_activity(const audiocpp_event * event,
                                                           size_t index,
                                                           audiocpp_voice_activity_kind * out_kind,
                                                           int64_t * out_sample,
                                                           float * out_probability);

#ifdef __cplusplus
}
#endif

#endif /* AUDIOCPP_H */
