/* A deterministic agent in C: always the lowest legal action (from the legal mask), or the low
 * bound of each action int range. The Python `first` agent and the JavaScript `first` agent play
 * the same policy, so the three give identical experiments. */
#include <string.h>

#include "rlbridge_agent.h"

typedef struct {
    rlb_task_spec spec;
    int64_t ints[RLB_MAX_RANGES];
    int64_t legal[4096];
} first_agent;

static int init(void *state, const char *task_spec, char *error) {
    return rlb_parse_task_spec(task_spec, &((first_agent *)state)->spec, error);
}

static int act(void *state, const rlb_value *observation, rlb_value *action, char *error) {
    first_agent *agent = state;
    (void)error;
    memset(action, 0, sizeof *action);
    action->ints = agent->ints;
    if (rlb_legal_actions(&agent->spec, observation, agent->legal, 4096) > 0) {
        agent->ints[0] = agent->legal[0];
        action->n_ints = 1;
        return 0;
    }
    for (int i = 0; i < agent->spec.n_action_ints; i++)
        agent->ints[i] = agent->spec.action_low[i];
    action->n_ints = (size_t)agent->spec.n_action_ints;
    return 0;
}

int main(int argc, char **argv) {
    static first_agent state;
    rlb_agent agent = {.name = "first", .state = &state, .init = init, .act = act};
    return rlb_main(argc, argv, &agent, NULL);
}
