/* A random agent in C: uniform over the legal actions when the observation has a legal mask,
 * otherwise uniform within each action int range of the task spec. Options: seed=N. Batched,
 * each instance draws from its own generator. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlbridge_agent.h"

typedef struct {
    rlb_task_spec spec;
    rlb_rng rng;
    int64_t ints[RLB_MAX_RANGES];
    int64_t legal[4096];
} random_agent;

static int init(void *state, const char *task_spec, char *error) {
    random_agent *agent = state;
    return rlb_parse_task_spec(task_spec, &agent->spec, error);
}

static int act(void *state, const rlb_value *observation, rlb_value *action, char *error) {
    random_agent *agent = state;
    (void)error;
    memset(action, 0, sizeof *action);
    action->ints = agent->ints;
    int n_legal = rlb_legal_actions(&agent->spec, observation, agent->legal, 4096);
    if (n_legal >= 0) {
        agent->ints[0] = n_legal > 0 ? agent->legal[rlb_rng_below(&agent->rng, (uint64_t)n_legal)]
                                     : agent->spec.action_low[0];
        action->n_ints = 1;
        return 0;
    }
    for (int i = 0; i < agent->spec.n_action_ints; i++) {
        int64_t low = agent->spec.action_low[i], high = agent->spec.action_high[i];
        agent->ints[i] = (low == INT64_MIN || high == INT64_MAX)
            ? (low == INT64_MIN ? 0 : low)
            : low + (int64_t)rlb_rng_below(&agent->rng, (uint64_t)(high - low + 1));
    }
    action->n_ints = (size_t)agent->spec.n_action_ints;
    return 0;
}

static void seed(void *state, uint64_t value) {
    rlb_rng_seed(&((random_agent *)state)->rng, value);
}

static int option(void *state, const char *key, const char *value) {
    if (strcmp(key, "seed") != 0)
        return 1;
    seed(state, strtoull(value, NULL, 10));
    return 0;
}

int main(int argc, char **argv) {
    static random_agent state;
    rlb_agent agent = {.name = "random", .state = &state, .init = init, .act = act,
                       .seed = seed, .instance_offset = offsetof(random_agent, rng),
                       .instance_size = sizeof(rlb_rng)};
    return rlb_main(argc, argv, &agent, option);
}
