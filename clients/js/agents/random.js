"use strict";
/** Uniform random actions: among the legal ones when the observation has a legal mask,
 * otherwise within each action int range of the task spec. Options: seed=N. */
const { Agent } = require("../lib/server");
const { legalActions, Rng } = require("../lib/taskspec");

class RandomAgent extends Agent {
  constructor(options = {}) {
    super();
    this.rng = new Rng(Number(options.seed || 0));
  }

  seed(seed) {
    this.rng.seed(seed);
  }

  act(observation) {
    const legal = legalActions(this.spec, observation);
    if (legal !== null) {
      return { ints: [legal.length ? legal[this.rng.below(legal.length)] : this.spec.actionInts[0][0]] };
    }
    return {
      ints: this.spec.actionInts.map(([low, high]) =>
        (Number.isFinite(low) && Number.isFinite(high) ? low + this.rng.below(high - low + 1)
          : (Number.isFinite(low) ? low : 0))),
    };
  }

  agentStart(observation) { return this.act(observation); }

  agentStep(reward, observation) { return this.act(observation); }
}

module.exports = { RandomAgent };
