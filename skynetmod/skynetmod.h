// skynetmod.h: the native `skynet` module. Its functions read the current
// call's context from the thread state (host.h) and call exported Go.
#ifndef SKYNETMOD_H
#define SKYNETMOD_H

#include "host.h"

// sky_observation is what Go measured for the current case; has_* = 0 means
// not measured (None in Python).
typedef struct {
    int has_run_ms, has_cost_usd, has_model_calls, has_input_tokens, has_output_tokens;
    double run_ms, cost_usd;
    long long model_calls, input_tokens, output_tokens;
} sky_observation;

// sky_reward_out is reward()'s result; feedback/error are malloc'd by Go.
typedef struct {
    double total, accuracy, speed, cost;
    char *feedback;
    size_t feedback_len;
    char *error;       // set on failure: the ValueError message
} sky_reward_out;

// sky_llm_out is llm()'s result; text/error are malloc'd by Go.
typedef struct {
    char *text;
    size_t text_len;
    char *error;
    int no_model;      // the error is "no model configured"
} sky_llm_out;

int skynetmod_register(void);
void skynetmod_set_python(const char *src);

#endif
