/*
 * lfm2e.h - lfm2-engine's extensions to the audio.cpp-compatible C interface (audiocpp.h).
 *
 * Everything here is specific to this implementation and lives under the `lfm2e_` prefix; a
 * program that uses only audiocpp.h runs against any implementation of audio.cpp's ABI 0.2.0.
 * The conventions of audiocpp.h hold (status codes, audiocpp_last_error, borrowed outputs).
 */
#ifndef LFM2E_H
#define LFM2E_H

#include "audiocpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Model paths from the Hugging Face Hub (a library built with the cargo feature `hub`):
 * audiocpp_model_load's model_path may be "hf:REPO[:QUANT]", e.g.
 * "hf:LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q4_0". The package's four files (by their published names)
 * are fetched into the Hugging Face cache when missing (HF_HOME / HF_HUB_CACHE, HF_TOKEN,
 * HF_ENDPOINT, HF_HUB_OFFLINE=1 for the cache only; shared with Python's huggingface_hub), each
 * checked against the hub's size and sha256 (a cached one too, hashed once per state of its
 * file), then loaded from there. Without :QUANT the config's
 * weight_id names the quantization, else Q4_0. A bad spec is AUDIOCPP_ERR_INVALID_ARGUMENT; a
 * failed download (network, 401/404, a cut transfer, a full disk, a checksum) is
 * AUDIOCPP_ERR_LOAD_FAILED with audiocpp_last_error() naming the file. Without the feature such a
 * path is an ordinary (missing) directory. */

/* Asks the run in progress on session (audiocpp_session_run, or a stream's next_event /
 * finish) to stop. Callable from any thread while another thread runs the session; returns at
 * once. The run stops at its next generation step and returns AUDIOCPP_ERR_RUNTIME with
 * audiocpp_last_error() starting with "cancelled"; a stream in flight is dropped. The session
 * stays usable (its caches are kept). A cancel that arrives when no run is in progress is
 * forgotten when the next run starts. An asr run stops at its next decode step too, inside an
 * audio chunk (a chunk's encoder and prompt passes, one computation each, run to their end).
 * AUDIOCPP_ERR_INVALID_ARGUMENT for NULL. */
AUDIOCPP_API audiocpp_status lfm2e_session_cancel(const audiocpp_session * session);

/* 1 if the session's last run or stream ended because it was cancelled, else 0 (also NULL). */
AUDIOCPP_API int lfm2e_session_was_cancelled(const audiocpp_session * session);

/* What the s2s session's caches saved in its last run: prompt positions restored from kept
 * prefill blocks instead of being computed, and earlier questions whose encoder output was
 * reused. Neither changes a byte of the output. 0 and 0 for asr and tts sessions and before a
 * first run. Not to be called while the session runs. Outs optional. */
AUDIOCPP_API audiocpp_status lfm2e_session_cache_figures(const audiocpp_session * session,
                                                         size_t * out_resumed_prefill_steps,
                                                         size_t * out_reused_questions);

/* What the model's step scheduler has run. A model batches its sessions' single-position
 * steps while at least LFM2_BATCH_FROM replies generate at once (default 3): each tick computes
 * the next step of up to LFM2_MAX_BATCH running replies (default 8; 1 turns batching off) as
 * one graph; with fewer replies each session computes its own steps. audio.cpp's load call has
 * no option for either, hence the environment, read when the model loads. A reply's bytes do
 * not depend on its company. out_ticks: ticks run (0 while nothing batched); out_steps: steps
 * run in them; out_widest: the most steps one tick ran. May be called while sessions run. Outs
 * optional. AUDIOCPP_ERR_INVALID_ARGUMENT for NULL. */
AUDIOCPP_API audiocpp_status lfm2e_model_step_stats(const audiocpp_model * model,
                                                    uint64_t * out_ticks, uint64_t * out_steps,
                                                    size_t * out_widest);

#ifdef __cplusplus
}
#endif

#endif /* LFM2E_H */
