/* Prints the C compiler's view of audiocpp.h's layout (sizes, offsets, enum values, version
 * macros) as "name value" lines; tests/c_abi_surface.rs compares them with the Rust side's. */
#include <stddef.h>
#include <stdio.h>

#include "audiocpp.h"
#include "lfm2e.h"

#define SIZE(T) printf("sizeof(%s) %zu\n", #T, sizeof(T))
#define OFFSET(T, f) printf("offsetof(%s, %s) %zu\n", #T, #f, offsetof(T, f))
#define VALUE(c) printf("%s %lld\n", #c, (long long) (c))

int main(void) {
    SIZE(audiocpp_model_config);
    OFFSET(audiocpp_model_config, family_hint);
    OFFSET(audiocpp_model_config, config_id);
    OFFSET(audiocpp_model_config, weight_id);
    OFFSET(audiocpp_model_config, model_spec_override);
    SIZE(audiocpp_backend_config);
    OFFSET(audiocpp_backend_config, backend);
    OFFSET(audiocpp_backend_config, device);
    OFFSET(audiocpp_backend_config, threads);
    SIZE(audiocpp_status);
    SIZE(audiocpp_option_scope);
    SIZE(audiocpp_artifact_kind);
    SIZE(audiocpp_stream_input_kind);
    SIZE(audiocpp_stream_output_kind);
    SIZE(audiocpp_voice_activity_kind);
    VALUE(AUDIOCPP_OK);
    VALUE(AUDIOCPP_ERR_INVALID_ARGUMENT);
    VALUE(AUDIOCPP_ERR_UNSUPPORTED_FAMILY);
    VALUE(AUDIOCPP_ERR_LOAD_FAILED);
    VALUE(AUDIOCPP_ERR_RUNTIME);
    VALUE(AUDIOCPP_ERR_OUT_OF_MEMORY);
    VALUE(AUDIOCPP_ERR_OUT_OF_RANGE);
    VALUE(AUDIOCPP_ERR_NOT_AVAILABLE);
    VALUE(AUDIOCPP_OPTION_SCOPE_REQUEST);
    VALUE(AUDIOCPP_OPTION_SCOPE_SESSION);
    VALUE(AUDIOCPP_OPTION_SCOPE_LOAD);
    VALUE(AUDIOCPP_ARTIFACT_SPEAKER_EMBEDDING);
    VALUE(AUDIOCPP_ARTIFACT_STYLE_EMBEDDING);
    VALUE(AUDIOCPP_ARTIFACT_PROMPT_EMBEDDING);
    VALUE(AUDIOCPP_ARTIFACT_ACOUSTIC_TOKENS);
    VALUE(AUDIOCPP_ARTIFACT_MIDI);
    VALUE(AUDIOCPP_ARTIFACT_TRANSCRIPT_ALIGNMENT);
    VALUE(AUDIOCPP_ARTIFACT_DIARIZATION_STATE);
    VALUE(AUDIOCPP_ARTIFACT_VAD_STATE);
    VALUE(AUDIOCPP_ARTIFACT_CUSTOM);
    VALUE(AUDIOCPP_STREAM_INPUT_NONE);
    VALUE(AUDIOCPP_STREAM_INPUT_AUDIO_CHUNKS);
    VALUE(AUDIOCPP_STREAM_OUTPUT_FINAL_RESULT);
    VALUE(AUDIOCPP_STREAM_OUTPUT_PULL_EVENTS);
    VALUE(AUDIOCPP_VOICE_ACTIVITY_SPEECH_START);
    VALUE(AUDIOCPP_VOICE_ACTIVITY_SPEECH_END);
    VALUE(AUDIOCPP_VOICE_ACTIVITY_SPEECH_SEGMENT);
    VALUE(AUDIOCPP_ABI_VERSION_MAJOR);
    VALUE(AUDIOCPP_ABI_VERSION_MINOR);
    VALUE(AUDIOCPP_ABI_VERSION_PATCH);
    /* The library at run time agrees with the header it was built against. */
    printf("audiocpp_abi_version() %lld\n", (long long) audiocpp_abi_version());
    return 0;
}
