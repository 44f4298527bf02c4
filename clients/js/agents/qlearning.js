"use strict";
/**
 * Tabular Q-learning (Watkins) with epsilon-greedy exploration, for tasks with one int action.
 * A state is the observation's ints followed by its integer arrays (the task spec's order);
 * the actions are the legal ones from the legal mask, or the first action range.
 *
 * Options: alpha (0.1), gamma (1.0), epsilon (0.1), seed (0), load=PATH, save=PATH (written
 * at agent_cleanup). Messages: "seed N", "save PATH", "load PATH", "greedy" (epsilon 0),
 * "states" (the number of states seen). Tables are stored as msgpack, never code.
 */
const fs = require("node:fs");
const { encode, decode } = require("@msgpack/msgpack");
const { Agent } = require("../lib/server");
const { flatInts } = require("../lib/protocol");
const { legalActions, Rng } = require("../lib/taskspec");

class QLearningAgent extends Agent {
  constructor(options = {}) {
    super();
    this.alpha = Number(options.alpha ?? 0.1);
    this.gamma = Number(options.gamma ?? 1.0);
    this.epsilon = Number(options.epsilon ?? 0.1);
    this.rng = new Rng(Number(options.seed || 0));
    this.savePath = options.save || null;
    this.table = new Map();
    if (options.load) this.load(options.load);
    this.previous = null;
  }

  seed(seed) { this.rng.seed(seed); }

  actions(observation) {
    const legal = legalActions(this.spec, observation);
    if (legal !== null) return legal.length ? legal : [this.spec.actionInts[0][0]];
    const [low, high] = this.spec.actionInts[0];
    return Array.from({ length: high - low + 1 }, (_, i) => low + i);
  }

  values(key) {
    let row = this.table.get(key);
    if (row === undefined) {
      row = new Map();
      this.table.set(key, row);
    }
    return row;
  }

  best(key, actions) {
    const row = this.values(key);
    let bestAction = actions[0];
    let bestValue = -Infinity;
    for (const action of actions) {
      const value = row.get(action) ?? 0;
      if (value > bestValue) { bestValue = value; bestAction = action; }
    }
    return [bestAction, bestValue];
  }

  choose(observation) {
    const key = flatInts(observation).join(",");
    const actions = this.actions(observation);
    const action = this.rng.next() < this.epsilon ? actions[this.rng.below(actions.length)]
      : this.best(key, actions)[0];
    this.previous = { key, action };
    return { ints: [action] };
  }

  update(target) {
    const { key, action } = this.previous;
    const row = this.values(key);
    const old = row.get(action) ?? 0;
    row.set(action, old + this.alpha * (target - old));
  }

  agentStart(observation) { return this.choose(observation); }

  agentStep(reward, observation) {
    const key = flatInts(observation).join(",");
    const [, next] = this.best(key, this.actions(observation));
    this.update(reward + this.gamma * next);
    return this.choose(observation);
  }

  agentEnd(reward) {
    if (this.previous) this.update(reward);
    this.previous = null;
  }

  agentCleanup() {
    if (this.savePath) this.save(this.savePath);
  }

  save(file) {
    const rows = {};
    for (const [key, row] of this.table) rows[key] = Object.fromEntries(row);
    fs.writeFileSync(file, encode({ kind: "rlbridge-js-qtable", rows }));
  }

  load(file) {
    const data = decode(fs.readFileSync(file));
    if (!data || data.kind !== "rlbridge-js-qtable") throw new Error(`${file} is not a Q table`);
    this.table = new Map(Object.entries(data.rows).map(([key, row]) =>
      [key, new Map(Object.entries(row).map(([a, v]) => [Number(a), v]))]));
  }

  agentMessage(text) {
    const [command, argument] = text.trim().split(/\s+/, 2);
    if (command === "save" && argument) { this.save(argument); return "ok"; }
    if (command === "load" && argument) { this.load(argument); return "ok"; }
    if (command === "greedy") { this.epsilon = 0; return "ok"; }
    if (command === "states") return String(this.table.size);
    return super.agentMessage(text);
  }
}

module.exports = { QLearningAgent };
