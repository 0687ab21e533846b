/* The smallest caller of the installed library: built by tests/c_install.rs with
 * `pkg-config --cflags --libs audiocpp` (and plain -laudiocpp, and statically). */
#include <audiocpp.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char ** argv) {
    if (argc < 2 || (audiocpp_abi_version() >> 16) != AUDIOCPP_ABI_VERSION_MAJOR) {
        return 2;
    }
    audiocpp_registry * reg = NULL;
    audiocpp_model * m = NULL;
    audiocpp_session * s = NULL;
    audiocpp_request * req = audiocpp_request_create();
    audiocpp_result * res = NULL;
    static float samples[16000];
    for (int i = 0; i < 16000; i++) {
        samples[i] = (float) (i * 7 % 400 - 200) / 512.0f;
    }
    const char * text = NULL;
    if (audiocpp_registry_create(NULL, &reg) || audiocpp_model_load(reg, argv[1], NULL, NULL, &m) ||
        audiocpp_session_create(m, "asr", "offline", NULL, NULL, &s) ||
        audiocpp_request_set_audio(req, samples, 16000, 16000, 1) ||
        audiocpp_request_set_option(req, "max_tokens", "2") ||
        audiocpp_session_run(s, req, &res) || audiocpp_result_text(res, &text, NULL)) {
        fprintf(stderr, "failed: %s\n", audiocpp_last_error());
        return 1;
    }
    printf("%s abi %06x %s, %zu bytes of text\n", audiocpp_model_family(m),
           (unsigned) audiocpp_abi_version(), audiocpp_build_version(), strlen(text));
    audiocpp_result_free(res);
    audiocpp_request_free(req);
    audiocpp_session_free(s);
    audiocpp_model_free(m);
    audiocpp_registry_free(reg);
    return 0;
}
