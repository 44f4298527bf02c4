"use strict";
/** Always the lowest legal action (or each action range's low bound): the deterministic policy
 * that the Python `first` agent and the C first_agent also play, for cross-language checks. */
const { Agent } = require("../lib/server");
const { legalActions } = require("../lib/taskspec");

class FirstAgent extends Agent {
  act(observation) {
    const legal = legalActions(this.spec, observation);
    if (legal && legal.length) return { ints: [legal[0]] };
    return { ints: this.spec.actionInts.map(([low]) => low) };
  }

  agentStart(observation) { return this.act(observation); }

  agentStep(reward, observation) { return this.act(observation); }
}

module.exports = { FirstAgent };
