/* Blackjack's optimal basic strategy (Sutton & Barto, figure 5.2) as a C agent.
 *
 * Observation: ints (player_sum, dealer_card 1-10, usable_ace 0/1); actions 0 stick, 1 hit.
 * This is the optimal policy of `rlbridge env blackjack` (infinite deck, dealer sticks on 17,
 * no natural bonus); rlbridge.games.blackjack.agents.dp.optimal() computes the same table by
 * dynamic programming, and the tests compare the two. */
#include <string.h>

#include "rlbridge_agent.h"

enum { STICK = 0, HIT = 1 };

typedef struct {
    int64_t ints[1];
} blackjack_agent;

/* The lowest player sum at which to stick, against dealer cards 1 (ace) to 10. */
static const int STICK_FROM_HARD[11] = {0, 17, 13, 13, 12, 12, 12, 17, 17, 17, 17};
static const int STICK_FROM_SOFT[11] = {0, 19, 18, 18, 18, 18, 18, 18, 18, 19, 19};

int blackjack_basic_action(int64_t player_sum, int64_t dealer_card, int64_t usable_ace) {
    if (dealer_card < 1 || dealer_card > 10)
        return player_sum >= 17 ? STICK : HIT;
    const int *table = usable_ace ? STICK_FROM_SOFT : STICK_FROM_HARD;
    return player_sum >= table[dealer_card] ? STICK : HIT;
}

static int act(void *state, const rlb_value *observation, rlb_value *action, char *error) {
    blackjack_agent *agent = state;
    if (observation->n_ints != 3) {
        strcpy(error, "the blackjack agent needs ints (player_sum, dealer_card, usable_ace)");
        return 1;
    }
    memset(action, 0, sizeof *action);
    agent->ints[0] = blackjack_basic_action(observation->ints[0], observation->ints[1],
                                            observation->ints[2]);
    action->ints = agent->ints;
    action->n_ints = 1;
    return 0;
}

int main(int argc, char **argv) {
    static blackjack_agent state;
    rlb_agent agent = {.name = "blackjack basic strategy", .state = &state, .act = act};
    return rlb_main(argc, argv, &agent, NULL);
}
